//! The CPU time of the handler's two JSON steps, reading one
//! AdmissionReview (the one-pass reader of review.rs) and encoding a denial's answer,
//! on the fixtures of a DELETE of a protected service (like the review
//! `make bench-webhook` posts) and of an UPDATE of a locked Stack: what of the
//! webhook's CPU per review is its own work rather than TLS and HTTP.
//! `cargo bench -p webhook --bench review_parse`; each figure is the
//! median of 9 timed runs of 20,000.

use std::hint::black_box;
use std::time::Instant;

use webhook::review::{self, Decision};

const RUNS: usize = 9;
const ITERATIONS: u32 = 20_000;

fn main() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for name in [
        "delete-protected-service.json",
        "update-locked-stack-spec.json",
    ] {
        let body = std::fs::read(fixtures.join(name)).expect("fixture");
        let parse = median_micros(|| review::parse(black_box(&body)).expect("a review"));
        let request = review::parse(&body).expect("a review");
        let denial = Decision::Deny("protected".to_owned());
        let answer = median_micros(|| {
            serde_json::to_vec(&review::answer(black_box(&request), &denial)).expect("encodes")
        });
        println!(
            "{name} ({} bytes): read {parse:.2} µs; a denial's answer encoded {answer:.2} µs",
            body.len(),
        );
    }
}

/// Median over [`RUNS`] of the mean time of `work`, in µs, after a run to
/// warm up.
fn median_micros<T>(work: impl Fn() -> T) -> f64 {
    let mut runs: Vec<f64> = (0..=RUNS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..ITERATIONS {
                black_box(work());
            }
            started.elapsed().as_secs_f64() * 1e6 / f64::from(ITERATIONS)
        })
        .skip(1)
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[RUNS / 2]
}
