//! What one region costs as the number of live regions grows: a chain of N small regions (each
//! region's input the previous one's output) against the same chain without regions, on the CPU
//! (Flex), forward and backward timed apart.
//!
//! `cargo bench --manifest-path kits/models22/Cargo.toml --bench chain -- --help`. Two bodies: `fn`
//! (`x * a + b` on 16 values, no module) and `linear` (one 16×16 `Linear` shared by every region,
//! then `tanh`). Each line gives µs per chain element (per region, or per body without regions),
//! the median of `--repeats` runs, plain and regions measured alternately in one process.
//!
//! Then a recurrent model whose regions pass their state on (modern-lstm's network,
//! `kits/models22/src/lstm.rs`: two layers, both directions, a region per cell call): a step's
//! forward and backward, plain and with regions, `--lstm` sets its sizes.

use std::time::{Duration, Instant};

use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use burn_checkpoint_22::{Region, checkpoint_fn};
use burn_checkpoint_22_models::lstm::LstmNetwork;
use burn_checkpoint_22_models::{Cut, initialised};
use clap::{Parser, ValueEnum};

#[derive(Parser, Debug)]
#[command(about = "A region's cost at 1k, 10k, 50k live regions: a chain against plain autodiff")]
struct Args {
    /// Chain lengths.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000")]
    lengths: Vec<usize>,
    /// Bodies.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fn,linear")]
    bodies: Vec<Body>,
    /// Runs of each (method, length, body); the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// The recurrent model: sequence length, batch, hidden units, layers (both directions).
    #[arg(long, value_delimiter = ',', default_value = "48,32,64,2")]
    lstm: Vec<usize>,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Body {
    /// `x * a + b`, no module.
    Fn,
    /// One shared 16×16 `Linear`, then `tanh`.
    Linear,
}

/// One chain's forward and backward times.
fn chain(length: usize, body: Body, regions: bool, linear: &Linear) -> (Duration, Duration) {
    let device = Device::flex().autodiff();
    let x = Tensor::<2>::ones([1, 16], &device).require_grad();
    let clock = Instant::now();
    let mut y = x.clone();
    for _ in 0..length {
        y = match (body, regions) {
            (Body::Fn, false) => y * 0.999 + 0.001,
            (Body::Fn, true) => checkpoint_fn(y, |y| y * 0.999 + 0.001),
            (Body::Linear, false) => linear.forward(y).tanh(),
            (Body::Linear, true) => {
                Region::named("linear").run(linear, y, |linear, y| linear.forward(y).tanh())
            }
        };
    }
    let loss = y.sum();
    let forward = clock.elapsed();
    let clock = Instant::now();
    let grads = loss.backward();
    let backward = clock.elapsed();
    assert!(x.grad(&grads).is_some());
    (forward, backward)
}

/// One step of the recurrent model: forward and loss, then backward.
fn recurrent_step(model: &LstmNetwork, x: &Tensor<3>, cut: Cut) -> Duration {
    let clock = Instant::now();
    let loss = model.forward(x.clone(), cut).powf_scalar(2.0).mean();
    drop(loss.backward());
    clock.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros_per(time: Duration, length: usize) -> f64 {
    time.as_secs_f64() * 1e6 / length as f64
}

fn main() {
    let args = Args::parse();
    let device = Device::flex().autodiff();
    device.seed(1);
    let linear: Linear = LinearConfig::new(16, 16).init(&device);
    println!(
        "| Body | Live regions | Plain forward | Regions forward | Plain backward | Regions backward | Backward above plain |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &body in &args.bodies {
        for &length in &args.lengths {
            let mut samples = [(); 4].map(|_| Vec::new());
            for _ in 0..args.repeats {
                for (offset, regions) in [(0, false), (2, true)] {
                    let (forward, backward) = chain(length, body, regions, &linear);
                    samples[offset].push(forward);
                    samples[offset + 1].push(backward);
                }
            }
            let [pf, pb, rf, rb] = samples.map(|s| micros_per(median(s), length));
            println!(
                "| {body:?} | {length} | {pf:.1} µs | {rf:.1} µs | {pb:.1} µs | {rb:.1} µs | {:.1} µs |",
                rb - pb
            );
        }
    }
    let [seq, batch, hidden, layers] = args.lstm[..] else {
        panic!("--lstm takes four numbers: sequence length, batch, hidden units, layers");
    };
    device.seed(2);
    let model = initialised(LstmNetwork::new(1, hidden, layers, true, 0.0, 1, &device));
    let x = LstmNetwork::sequences(batch, seq, 1, &device);
    let (mut plain, mut regions) = (Vec::new(), Vec::new());
    for round in 0..=args.repeats {
        let (p, r) = (
            recurrent_step(&model, &x, Cut::None),
            recurrent_step(&model, &x, Cut::Regions),
        );
        // The first round warms up.
        if round > 0 {
            plain.push(p);
            regions.push(r);
        }
    }
    let (plain, regions) = (median(plain), median(regions));
    println!();
    println!("| Recurrent model | Plain step | Regions step | × plain |");
    println!("|---|---|---|---|");
    println!(
        "| modern-lstm, seq {seq}, batch {batch}, hidden {hidden}, {layers} layers both ways ({} regions) | {:.1} ms | {:.1} ms | {:.2} |",
        seq * layers * 2,
        plain.as_secs_f64() * 1e3,
        regions.as_secs_f64() * 1e3,
        regions.as_secs_f64() / plain.as_secs_f64()
    );
}
