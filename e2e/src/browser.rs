//! `kubectl navique ui` as a person uses it: the plugin serving its page
//! (started through kubectl, as the user of a kubeconfig) and a real
//! headless Chromium driven over WebDriver (Debian's `chromium` and
//! `chromium-driver`, which `make setup` installs). Without them the tests
//! fail, saying so: they never pass by skipping.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;

use crate::{Cluster, binary, eventually, free_port};

/// Where Debian installs them.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const WAIT: Duration = Duration::from_secs(30);

/// A running `kubectl navique ui --no-open` and the URL it printed.
pub struct UiServer {
    child: Child,
    /// `http://127.0.0.1:<port>/<token>/`.
    pub url: String,
}

impl UiServer {
    /// Starts the page as the user of `kubeconfig`, with `args` (e.g.
    /// `-n <ns>`); returns once it printed its URL.
    pub fn start(cluster: &Cluster, kubeconfig: &Path, args: &[&str]) -> Self {
        let mut all = vec!["ui", "--no-open"];
        all.extend_from_slice(args);
        Self::spawn(crate::plugin::command(cluster, kubeconfig, &all))
    }

    /// [`UiServer::start`] opening the page with `$BROWSER=<opener>`, as
    /// on a desktop.
    pub fn start_opening(
        cluster: &Cluster,
        kubeconfig: &Path,
        args: &[&str],
        opener: &Path,
    ) -> Self {
        let mut all = vec!["ui"];
        all.extend_from_slice(args);
        let mut command = crate::plugin::command(cluster, kubeconfig, &all);
        command.env("BROWSER", opener);
        Self::spawn(command)
    }

    fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start kubectl navique ui");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .expect("read the page's URL");
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("kubectl navique ui printed no URL: {first:?}"))
            .to_owned();
        Self { child, url }
    }

    /// `127.0.0.1:<port>`.
    pub fn authority(&self) -> &str {
        let rest = self.url.trim_start_matches("http://");
        &rest[..rest.find('/').expect("a path")]
    }

    /// The token, the URL's first path segment.
    pub fn token(&self) -> &str {
        self.url
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .expect("a token")
    }
}

impl Drop for UiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium session and the chromedriver behind it.
pub struct Browser {
    pub client: Client,
    chromedriver: Child,
}

impl Browser {
    pub async fn start() -> Self {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: the browser tests need Debian's {package}; run `make setup`"
            );
        }
        let port = free_port();
        // Its own process group, so that Chromium goes with it.
        let chromedriver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let server = format!("http://127.0.0.1:{port}");
        let capabilities = serde_json::json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    // Tests run as root, where Chromium's sandbox cannot start.
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    // Tall enough that the overview screenshot (docs/stacks.md)
                    // shows every panel.
                    "--window-size=1280,1150",
                ]
            }
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let client = eventually(WAIT, "chromedriver to start a session", || {
            let capabilities = capabilities.clone();
            let server = server.clone();
            async move {
                ClientBuilder::new(HttpConnector::new())
                    .capabilities(capabilities)
                    .connect(&server)
                    .await
                    .ok()
            }
        })
        .await;
        Self {
            client,
            chromedriver,
        }
    }

    /// Opens `url`.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.expect("open the page");
    }

    /// The text of the first element matching `css`, when there is one.
    pub async fn text(&self, css: &str) -> Option<String> {
        let element = self.client.find(Locator::Css(css)).await.ok()?;
        element.text().await.ok()
    }

    /// The texts of every element matching `css`.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let mut out = Vec::new();
        for element in self
            .client
            .find_all(Locator::Css(css))
            .await
            .unwrap_or_default()
        {
            out.push(element.text().await.unwrap_or_default());
        }
        out
    }

    /// Waits until the first element matching `css` shows text that
    /// `check` accepts; returns that text.
    pub async fn until_text(&self, css: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
        eventually(WAIT, what, || async {
            self.text(css).await.filter(|t| check(t))
        })
        .await
    }

    /// Waits until no element matches `css`.
    pub async fn until_gone(&self, css: &str, what: &str) {
        eventually(WAIT, what, || async {
            let found = self.client.find_all(Locator::Css(css)).await.ok()?;
            found.is_empty().then_some(())
        })
        .await;
    }

    /// Clicks the first element matching `css`.
    pub async fn click(&self, css: &str) {
        let element = eventually(WAIT, &format!("{css} to be shown"), || async {
            self.client.find(Locator::Css(css)).await.ok()
        })
        .await;
        element
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Saves a screenshot as `target/ui-screenshots/<name>.png` and prints
    /// where.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let folder = screenshots();
        std::fs::create_dir_all(&folder).expect("screenshot folder");
        let path = folder.join(format!("{name}.png"));
        let png = self.client.screenshot().await.expect("take a screenshot");
        std::fs::write(&path, png).expect("write the screenshot");
        println!("screenshot: {}", path.display());
        path
    }

    /// Ends the session (Chromium exits).
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The group chromedriver leads: it and the Chromium it started.
        let group = format!("-{}", self.chromedriver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.chromedriver.wait();
    }
}

/// `target/ui-screenshots`: next to the profile folder of the binaries.
pub fn screenshots() -> PathBuf {
    let plugin = binary("kubectl-navique");
    plugin
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/kubectl-navique")
        .join("ui-screenshots")
}
