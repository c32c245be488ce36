//! What a region costs as the number of live regions grows: a chain of one-op regions, each
//! region's input the previous one's output, forward and backward, against plain `Autodiff` on
//! the same chain of ops. A region's bookkeeping (which tensors regions made, their recipes, host
//! copies) must not grow with how many regions are alive: from the shortest chain to the longest,
//! the time per region may grow at most 1.5× as much as plain autodiff's time per op does (which
//! grows too: its graph is as long).
//!
//! Rows: plain autodiff (time per op), regions (time per region), offloaded regions
//! (`Region::offloaded()`: every region input kept in host memory). Chains of each
//! length are run interleaved, each a fresh graph; each figure is the median of the rounds.
//!
//! ```text
//! cargo bench --bench chain                         # lengths 1000, 5000, 20000; 5 rounds
//! cargo bench --bench chain -- --lengths 1000,20000 --rounds 3
//! ```

use std::time::Instant;

use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::{Checkpointed, Region};

type Plain = Autodiff<Flex>;
type Ckpt = Checkpointed<Autodiff<Flex>>;

/// Chains of one-op regions: time per region against plain autodiff's per op, as chains grow.
#[derive(clap::Parser)]
struct Args {
    /// Chain lengths (regions, or plain ops), shortest first.
    #[arg(long, value_delimiter = ',', default_values_t = [1000, 5000, 20000])]
    lengths: Vec<usize>,
    /// Rounds (each runs every method at every length once).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Methods to run: plain, regions, offloaded (all by default).
    #[arg(long, value_delimiter = ',', default_values_t = [String::from("plain"), String::from("regions"), String::from("offloaded")])]
    methods: Vec<String>,
    /// Elements of the chained tensor.
    #[arg(long, default_value_t = 16)]
    width: usize,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Plain,
    Regions,
    Offloaded,
}

impl Method {
    fn parse(name: &str) -> Method {
        match name {
            "plain" => Method::Plain,
            "regions" => Method::Regions,
            "offloaded" => Method::Offloaded,
            other => panic!("unknown method {other}: plain, regions or offloaded"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Method::Plain => "plain autodiff (per op)",
            Method::Regions => "regions (per region)",
            Method::Offloaded => "offloaded regions (per region)",
        }
    }
}

/// Seconds for a chain of `length` ops (each `tanh`), forward and backward.
fn chain<B: AutodiffBackend>(length: usize, width: usize, region: Option<&Region>) -> f64 {
    let device = Default::default();
    let x = Tensor::<B, 1>::ones([width], &device).require_grad();
    let started = Instant::now();
    let mut h = x.clone();
    for _ in 0..length {
        h = match region {
            Some(region) => region.run(|| h.tanh()),
            None => h.tanh(),
        };
    }
    let grads = h.sum().backward();
    let seconds = started.elapsed().as_secs_f64();
    assert!(x.grad(&grads).is_some());
    seconds
}

fn run(method: Method, length: usize, width: usize) -> f64 {
    // Burn frees a finished graph during a later backward pass: the timed chain follows an
    // untimed one of the same method and length, so that it pays for freeing a graph like its
    // own, as a step of a training loop pays for the step before it.
    timed(method, length, width);
    timed(method, length, width)
}

fn timed(method: Method, length: usize, width: usize) -> f64 {
    match method {
        Method::Plain => chain::<Plain>(length, width, None),
        Method::Regions => chain::<Ckpt>(length, width, Some(&Region::named("link"))),
        Method::Offloaded => chain::<Ckpt>(length, width, Some(&Region::named("link").offloaded())),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args: Args = clap::Parser::parse();
    let lengths = &args.lengths;
    assert!(lengths.len() >= 2, "give at least two lengths");
    let methods: Vec<Method> = args.methods.iter().map(|m| Method::parse(m)).collect();
    // Warm-up: allocator and thread-local tables at full size.
    for &method in &methods {
        run(method, lengths[0], args.width);
    }
    let mut samples = vec![vec![Vec::new(); lengths.len()]; methods.len()];
    for _ in 0..args.rounds.max(1) {
        for (l, &length) in lengths.iter().enumerate() {
            for (m, &method) in methods.iter().enumerate() {
                samples[m][l].push(run(method, length, args.width) / length as f64);
            }
        }
    }
    let per: Vec<Vec<f64>> = samples
        .into_iter()
        .map(|by_length| by_length.into_iter().map(median).collect())
        .collect();
    let (first, last) = (lengths[0], lengths[lengths.len() - 1]);
    print!("| chain of tanh, µs per op or region |");
    for length in lengths {
        print!(" {length} |");
    }
    println!(" growth {first} → {last} | × plain's growth |");
    println!("|---|{}---|---|", "---|".repeat(lengths.len()));
    let growth = |row: &[f64]| row[row.len() - 1] / row[0];
    let plain_growth = methods
        .iter()
        .position(|&m| m == Method::Plain)
        .map(|p| growth(&per[p]));
    for (m, method) in methods.iter().enumerate() {
        print!("| {} |", method.name());
        for value in &per[m] {
            print!(" {:.2} |", value * 1e6);
        }
        match plain_growth {
            Some(plain) => println!(
                " {:.2}× | {:.2} |",
                growth(&per[m]),
                growth(&per[m]) / plain
            ),
            None => println!(" {:.2}× | – |", growth(&per[m])),
        }
    }
    println!(
        "\nmedian of {} rounds, interleaved; target: × plain's growth ≤ 1.5 for both region rows",
        args.rounds.max(1)
    );
}
