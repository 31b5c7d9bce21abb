//! The benchmarks' harness around rsp-rs (crates.io), a peer engine measured beside csparql.
//!
//! `csparql-rsp-rs-peer QUERY EVENTS TIMES STATIC STREAM WIDTH_MS REPETITIONS` evaluates one window with
//! rsp-rs, `REPETITIONS` times after one warm-up, each time with a new engine: the static graph added
//! (N-Triples, `STATIC`), the stream's events pushed in timestamp order (`EVENTS`: N-Triples, one triple a line;
//! `TIMES`: each line's timestamp in ms, ascending, the first above 0), then the stream closed so that the one
//! tumbling window of `WIDTH_MS` holding them all reports. It prints one JSON object: each repetition's
//! milliseconds from the first event pushed to the last binding received, and the bindings of the last one
//! (rsp-rs prints each as Rust's debug form of the solution).

use std::fs;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use oxigraph::io::{RdfFormat, RdfParser};
use oxigraph::model::{GraphName, Quad};
use rsp_rs::RSPEngine;

fn triples(path: &str) -> Vec<Quad> {
    let text = fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    RdfParser::from_format(RdfFormat::NTriples)
        .for_slice(&text)
        .map(|quad| {
            let quad = quad.unwrap_or_else(|e| panic!("{path}: {e}"));
            Quad::new(quad.subject, quad.predicate, quad.object, GraphName::DefaultGraph)
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 8 {
        eprintln!("usage: {} QUERY EVENTS TIMES STATIC STREAM WIDTH_MS REPETITIONS", args[0]);
        std::process::exit(2);
    }
    let query = fs::read_to_string(&args[1]).expect("the query file");
    let events = triples(&args[2]);
    let times: Vec<i64> = fs::read_to_string(&args[3])
        .expect("the times file")
        .lines()
        .map(|line| line.trim().parse().expect("a timestamp in ms"))
        .collect();
    assert_eq!(events.len(), times.len(), "one timestamp per event");
    let statics = triples(&args[4]);
    let stream_iri = &args[5];
    let width: i64 = args[6].parse().expect("the window's width in ms");
    let repetitions: usize = args[7].parse().expect("the number of repetitions");

    let mut milliseconds = Vec::new();
    let mut bindings = Vec::new();
    for repetition in 0..=repetitions {
        let mut engine = RSPEngine::new(query.clone());
        engine.initialize().expect("rsp-rs refused the query");
        for quad in &statics {
            engine.add_static_data(quad.clone());
        }
        let stream = engine.get_stream(stream_iri).expect("the query's stream");
        let results = engine.start_processing();
        let clock = Instant::now();
        let mut start = 0;
        while start < events.len() {
            let mut end = start;
            while end < events.len() && times[end] == times[start] {
                end += 1;
            }
            stream.add_quads(events[start..end].to_vec(), times[start]).expect("an event pushed");
            start = end;
        }
        engine.close_stream(stream_iri, times[0] + width + 1).expect("the stream closed");
        let mut received = Vec::new();
        let mut last = clock.elapsed();
        loop {
            match results.recv_timeout(Duration::from_millis(if received.is_empty() { 60_000 } else { 300 })) {
                Ok(binding) => {
                    received.push(binding.bindings);
                    last = clock.elapsed();
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        if repetition > 0 {
            milliseconds.push(last.as_secs_f64() * 1000.0);
        }
        bindings = received;
    }
    println!("{}", serde_json::json!({"milliseconds": milliseconds, "bindings": bindings}));
}
