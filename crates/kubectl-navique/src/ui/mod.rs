//! `kubectl navique ui`: the pure parts of the local page. Who may drive it
//! ([`guard`]), what it shows ([`view`]), what an approval it sends may
//! approve ([`request`]), what it offers to preview ([`preview`]), and its assets, embedded in the binary (no CDN:
//! the page works without internet).

pub mod guard;
pub mod preview;
pub mod request;
pub mod view;

/// The page, its script and its style sheet: hand-written, no framework.
pub mod assets {
    pub const INDEX_HTML: &str = include_str!("assets/index.html");
    pub const APP_JS: &str = include_str!("assets/app.js");
    pub const STYLE_CSS: &str = include_str!("assets/style.css");
}

/// The Content-Security-Policy of every answer: the page's own script and
/// style only, no inline code, no frames, no other origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The file the browser is opened on: it sends the browser on to `url`,
/// so the token is in no process's arguments (the file is the user's own,
/// mode 0600), only in the user's terminal and browser.
pub fn redirect_page(url: &str) -> String {
    format!(
        "<!doctype html>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0;url={url}\">\n<title>Navique approvals</title>\n<p><a href=\"{url}\">Open the Navique approvals page</a></p>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_page_sends_the_browser_to_the_url() {
        let page = redirect_page("http://127.0.0.1:1/abc/");
        assert!(page.contains(r#"content="0;url=http://127.0.0.1:1/abc/""#));
        assert!(page.contains(r#"<a href="http://127.0.0.1:1/abc/">"#));
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for asset in [assets::INDEX_HTML, assets::APP_JS, assets::STYLE_CSS] {
            assert!(!asset.contains("http://"), "{asset}");
            assert!(!asset.contains("https://"), "{asset}");
            assert!(!asset.contains("//cdn"), "{asset}");
        }
        // Relative asset paths, so they carry the token's path prefix.
        assert!(assets::INDEX_HTML.contains(r#"src="app.js""#));
        assert!(assets::INDEX_HTML.contains(r#"href="style.css""#));
    }
}
