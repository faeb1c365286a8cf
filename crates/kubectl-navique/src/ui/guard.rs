//! Who may drive the page: only a request that carries the one-time token
//! (the first path segment, compared in constant time), names this server
//! in `Host` (no DNS rebinding), and, when it is not the top-level page
//! load, comes from the page itself (`Origin`, `Sec-Fetch-Site`: no CSRF).
//! A change (`POST`) must also be JSON with this server's `Origin`, so a
//! cross-site form or `fetch` can neither send it nor skip the preflight.

use subtle::ConstantTimeEq;

/// Random bytes in a token: 256 bits.
const TOKEN_BYTES: usize = 32;

/// The page's one-time token: fresh random bytes each run, in hex.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// A new token from the operating system's random source.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes)?;
        Ok(Self(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is this token, in time that does not depend on
    /// where they differ.
    pub fn matches(&self, candidate: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(candidate.as_bytes()))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// What the guard reads from a request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    /// `Sec-Fetch-Site`, which browsers send with every request.
    pub fetch_site: Option<&'a str>,
    /// `Sec-Fetch-Mode`: `navigate` for a page load.
    pub fetch_mode: Option<&'a str>,
    pub content_type: Option<&'a str>,
}

/// Why a request was refused; the text is the response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this page answers only requests for {0}")]
    Host(&'static str),
    #[error("this page needs the token of the URL `kubectl navique ui` printed")]
    Token,
    #[error("requests from other sites are refused")]
    CrossSite,
    #[error("changes must be JSON sent by the page itself")]
    NotFromPage,
}

/// The page's address and token.
#[derive(Clone, Debug)]
pub struct Guard {
    token: Token,
    port: u16,
}

impl Guard {
    pub fn new(token: Token, port: u16) -> Self {
        Self { token, port }
    }

    /// `http://127.0.0.1:<port>/<token>/`: the page.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/{}/", self.port, self.token.as_str())
    }

    /// The hosts this server answers as: the loopback address it is bound
    /// to, and `localhost`, which only resolves to this machine.
    fn is_own_host(&self, host: &str) -> bool {
        host == format!("127.0.0.1:{}", self.port) || host == format!("localhost:{}", self.port)
    }

    fn is_own_origin(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|host| self.is_own_host(host))
    }

    /// The path after the token (`/`, `/app.js`, `/events`, ...) when the
    /// request may be answered.
    pub fn check<'a>(&self, facts: &Facts<'a>) -> Result<&'a str, Refusal> {
        if !facts.host.is_some_and(|h| self.is_own_host(h)) {
            return Err(Refusal::Host("127.0.0.1 and localhost on this port"));
        }
        let rest = facts.path.strip_prefix('/').unwrap_or(facts.path);
        let (token, rest) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        if !self.token.matches(token) {
            return Err(Refusal::Token);
        }
        if facts.origin.is_some_and(|o| !self.is_own_origin(o)) {
            return Err(Refusal::CrossSite);
        }
        // A page load may follow a link from anywhere (the terminal, the
        // redirect file); everything else must come from the page.
        let navigation = facts.method == "GET" && facts.fetch_mode == Some("navigate");
        if !navigation && facts.fetch_site.is_some_and(|s| s != "same-origin") {
            return Err(Refusal::CrossSite);
        }
        if facts.method != "GET" {
            let json = facts
                .content_type
                .and_then(|c| c.split(';').next())
                .is_some_and(|c| c.trim().eq_ignore_ascii_case("application/json"));
            if !json || !facts.origin.is_some_and(|o| self.is_own_origin(o)) {
                return Err(Refusal::NotFromPage);
            }
        }
        Ok(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> (Guard, String) {
        let token = Token::generate().unwrap();
        let text = token.as_str().to_owned();
        (Guard::new(token, 8123), text)
    }

    fn get<'a>(path: &'a str) -> Facts<'a> {
        Facts {
            method: "GET",
            path,
            host: Some("127.0.0.1:8123"),
            ..Facts::default()
        }
    }

    fn post<'a>(path: &'a str) -> Facts<'a> {
        Facts {
            method: "POST",
            path,
            host: Some("127.0.0.1:8123"),
            origin: Some("http://127.0.0.1:8123"),
            fetch_site: Some("same-origin"),
            content_type: Some("application/json"),
            ..Facts::default()
        }
    }

    #[test]
    fn tokens_are_fresh_256_bit_hex() {
        let (a, b) = (Token::generate().unwrap(), Token::generate().unwrap());
        assert_eq!(a.as_str().len(), 64);
        assert!(a.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a.as_str(), b.as_str());
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(&a.as_str()[..63]));
        assert!(!a.matches(""));
        assert_eq!(format!("{a:?}"), "Token(..)");
    }

    #[test]
    fn the_url_names_the_loopback_address_port_and_token() {
        let (guard, token) = guard();
        assert_eq!(guard.url(), format!("http://127.0.0.1:8123/{token}/"));
    }

    #[test]
    fn requests_with_the_token_get_the_path_after_it() {
        let (guard, token) = guard();
        for (path, rest) in [
            (format!("/{token}/"), "/"),
            (format!("/{token}"), ""),
            (format!("/{token}/app.js"), "/app.js"),
            (format!("/{token}/events"), "/events"),
        ] {
            assert_eq!(guard.check(&get(&path)), Ok(rest), "{path}");
        }
        let path = format!("/{token}/api/approve");
        assert_eq!(guard.check(&post(&path)), Ok("/api/approve"));
        let localhost = Facts {
            host: Some("localhost:8123"),
            origin: Some("http://localhost:8123"),
            ..post(&path)
        };
        assert_eq!(guard.check(&localhost), Ok("/api/approve"));
    }

    #[test]
    fn requests_without_the_right_token_are_refused() {
        let (guard, token) = guard();
        let other = Token::generate().unwrap();
        for path in [
            "/".to_owned(),
            "/app.js".to_owned(),
            format!("/{}/", other.as_str()),
            format!("/{}/", &token[..32]),
            format!("/x{token}/"),
            format!("//{token}/"),
        ] {
            assert_eq!(guard.check(&get(&path)), Err(Refusal::Token), "{path}");
        }
    }

    /// DNS rebinding: a page of attacker.example whose name now resolves
    /// to 127.0.0.1 sends its own name as Host.
    #[test]
    fn another_host_name_is_refused_even_with_the_token() {
        let (guard, token) = guard();
        let path = format!("/{token}/");
        for host in [
            None,
            Some("attacker.example:8123"),
            Some("127.0.0.1:9999"),
            Some("127.0.0.1"),
            Some("[::1]:8123"),
        ] {
            let facts = Facts { host, ..get(&path) };
            assert!(
                matches!(guard.check(&facts), Err(Refusal::Host(_))),
                "{host:?}"
            );
        }
    }

    /// CSRF: another site's page posting to the page, or reading it.
    #[test]
    fn requests_from_other_sites_are_refused() {
        let (guard, token) = guard();
        let approve = format!("/{token}/api/approve");
        let events = format!("/{token}/events");
        for facts in [
            Facts {
                origin: Some("http://attacker.example"),
                ..post(&approve)
            },
            Facts {
                origin: Some("null"),
                ..post(&approve)
            },
            Facts {
                fetch_site: Some("cross-site"),
                ..post(&approve)
            },
            Facts {
                fetch_site: Some("same-site"),
                ..get(&events)
            },
            Facts {
                origin: Some("http://127.0.0.1:9999"),
                ..get(&events)
            },
        ] {
            assert_eq!(guard.check(&facts), Err(Refusal::CrossSite), "{facts:?}");
        }
    }

    #[test]
    fn a_change_must_be_json_with_the_pages_origin() {
        let (guard, token) = guard();
        let approve = format!("/{token}/api/approve");
        for facts in [
            Facts {
                content_type: Some("application/x-www-form-urlencoded"),
                ..post(&approve)
            },
            Facts {
                content_type: Some("text/plain"),
                ..post(&approve)
            },
            Facts {
                content_type: None,
                ..post(&approve)
            },
            Facts {
                origin: None,
                ..post(&approve)
            },
        ] {
            assert_eq!(guard.check(&facts), Err(Refusal::NotFromPage), "{facts:?}");
        }
        let charset = Facts {
            content_type: Some("application/json; charset=utf-8"),
            ..post(&approve)
        };
        assert_eq!(guard.check(&charset), Ok("/api/approve"));
    }

    #[test]
    fn a_page_load_may_come_from_a_link_anywhere() {
        let (guard, token) = guard();
        let page = format!("/{token}/");
        let link = Facts {
            fetch_site: Some("cross-site"),
            fetch_mode: Some("navigate"),
            ..get(&page)
        };
        assert_eq!(guard.check(&link), Ok("/"));
        let typed = Facts {
            fetch_site: Some("none"),
            fetch_mode: Some("navigate"),
            ..get(&page)
        };
        assert_eq!(guard.check(&typed), Ok("/"));
        // A script of another site fetching the page is not a page load.
        let fetched = Facts {
            fetch_site: Some("cross-site"),
            fetch_mode: Some("cors"),
            ..get(&page)
        };
        assert_eq!(guard.check(&fetched), Err(Refusal::CrossSite));
    }
}
