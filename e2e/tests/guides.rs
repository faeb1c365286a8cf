//! The guides are walkthroughs, kept true: this runs the shell blocks of
//! the README's quick start and then of the walkthroughs of docs/locks.md,
//! docs/stacks.md and docs/managed-services.md, in order, against a dev
//! environment of its own (scripts/dev-up.sh with its own directory and
//! ports), and compares
//! each block's output with the `text` block that follows it, where the
//! guide shows one.
//!
//! Conventions in the Markdown: a ```sh block runs with `bash -eu`, from
//! the repository root, with the environment's `.dev/env` sourced; it must
//! succeed, unless the comment `<!-- guide-test: fails -->` precedes it;
//! `<!-- guide-test: skip ... -->` leaves it out (say why). A ```text block
//! right after it is its whole output (stdout, then stderr), compared
//! exactly, trailing spaces aside.

use std::path::Path;
use std::process::Command;

use navique_e2e::{free_port, repo_root};

/// One shell block of a guide.
#[derive(Debug)]
struct Block {
    line: usize,
    script: String,
    fails: bool,
    skip: bool,
    expected: Option<String>,
}

/// The blocks of `markdown` between the headings `from` and the next one
/// of the same level.
fn blocks(markdown: &str, from: &str) -> Vec<Block> {
    let start = markdown.find(from).unwrap_or_else(|| panic!("no {from}"));
    let level = from.split(' ').next().unwrap();
    let section = &markdown[start + from.len()..];
    let end = section
        .find(&format!("\n{level} "))
        .unwrap_or(section.len());
    let first_line = markdown[..start].lines().count() + 1;
    let lines: Vec<&str> = section[..end].lines().collect();
    let mut out: Vec<Block> = Vec::new();
    let mut marker = "";
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("<!-- guide-test:") {
            marker = line;
        } else if line == "```sh" || line == "```text" {
            let body: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| **l != "```")
                .copied()
                .collect();
            let text = body.join("\n") + "\n";
            if line == "```sh" {
                out.push(Block {
                    line: first_line + i,
                    script: text,
                    fails: marker.contains("guide-test: fails"),
                    skip: marker.contains("guide-test: skip"),
                    expected: None,
                });
            } else {
                let last = out.last_mut().expect("a text block after a sh block");
                assert!(
                    last.expected.is_none(),
                    "two outputs for line {}",
                    last.line
                );
                last.expected = Some(text);
            }
            marker = "";
            i += body.len() + 1;
        } else if !line.trim().is_empty() {
            marker = if line.starts_with("<!--") { line } else { "" };
        }
        i += 1;
    }
    out
}

fn normalize(output: &str) -> String {
    output
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_owned()
}

/// A dev environment of the test's own, stopped on drop.
struct DevEnv {
    dir: tempfile::TempDir,
}

impl DevEnv {
    fn script(&self, script: &str) -> std::process::Output {
        let port = |name: &str| (name.to_owned(), free_port().to_string());
        let output = Command::new(repo_root().join(script))
            .env("DEV_DIR", self.dir.path())
            .envs([
                (
                    "DEV_APISERVER_ADDR".to_owned(),
                    format!("127.0.0.1:{}", free_port()),
                ),
                port("DEV_POSTGRES_PORT"),
                port("DEV_WEBHOOK_PORT"),
                port("DEV_BACKUP_RUNNER_PORT"),
                port("DEV_APPROVALS_PORT"),
                // One admin port per component: a run of ports from one
                // free port could reach a port given above.
                (
                    "DEV_ADMIN_PORTS".to_owned(),
                    [(); 4].map(|()| free_port().to_string()).join(" "),
                ),
            ])
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{script}:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn start() -> Self {
        let env = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        env.script("scripts/dev-up.sh");
        env
    }

    fn env_file(&self) -> std::path::PathBuf {
        self.dir.path().join("env")
    }
}

impl Drop for DevEnv {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/dev-down.sh"))
            .env("DEV_DIR", self.dir.path())
            .current_dir(repo_root())
            .output();
    }
}

fn run_guide(env: &DevEnv, file: &str, section: &str) -> usize {
    let markdown = std::fs::read_to_string(repo_root().join(file)).unwrap();
    let blocks = blocks(&markdown, section);
    assert!(!blocks.is_empty(), "{file} {section}: no shell blocks");
    let mut ran = 0;
    for block in blocks.iter().filter(|b| !b.skip) {
        let output = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}\nset -eu\n{}",
                env.env_file().display(),
                block.script
            ))
            .current_dir(repo_root())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let at = format!("{file}:{}", block.line);
        assert_eq!(
            output.status.success(),
            !block.fails,
            "{at}: {}\n{stdout}{stderr}",
            block.script
        );
        if let Some(expected) = &block.expected {
            assert_eq!(
                normalize(&format!("{stdout}{stderr}")),
                normalize(expected),
                "{at}: the output differs from the guide's"
            );
        }
        ran += 1;
    }
    ran
}

#[test]
fn the_block_reader_sees_markers_and_outputs() {
    let markdown = "## Quick start\n\n<!-- guide-test: skip (a reason) -->\n```sh\nhelm install x\n```\n\nText.\n\n<!-- guide-test: fails -->\n```sh\nfalse\n```\n\n```text\nout\n```\n\n```sh\ntrue\n```\n\n## Next\n\n```sh\nnot this\n```\n";
    let blocks = blocks(markdown, "## Quick start");
    assert_eq!(blocks.len(), 3, "{blocks:?}");
    assert!(blocks[0].skip && !blocks[0].fails);
    assert!(blocks[1].fails && !blocks[1].skip);
    assert_eq!(blocks[1].expected.as_deref(), Some("out\n"));
    assert!(!blocks[2].fails && !blocks[2].skip && blocks[2].expected.is_none());
    assert_eq!(blocks[2].script, "true\n");
    assert!(Path::new(&repo_root().join("scripts/dev-up.sh")).exists());
}

#[test]
fn the_readme_quick_start_and_the_guides_walkthroughs_run_as_written() {
    let env = DevEnv::start();
    let ran = run_guide(&env, "README.md", "## Quick start");
    assert!(ran >= 7, "{ran} blocks ran");
    // The same environment, as a reader who goes on to the guides.
    let ran = run_guide(&env, "docs/locks.md", "## Walkthrough");
    assert_eq!(ran, 5, "docs/locks.md: {ran} blocks ran");
    let ran = run_guide(&env, "docs/stacks.md", "## Walkthrough");
    assert_eq!(ran, 3, "docs/stacks.md: {ran} blocks ran");
    let ran = run_guide(&env, "docs/managed-services.md", "## Walkthrough");
    assert_eq!(ran, 4, "docs/managed-services.md: {ran} blocks ran");
}
