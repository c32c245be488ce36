//! What one region costs as the number of live regions grows: a chain of N small regions (each
//! region's input the previous one's output) against the same chain without regions, on the CPU
//! (Flex), forward and backward timed apart.
//!
//! `cargo bench --manifest-path kits/models22/Cargo.toml --bench chain -- --help`. Two bodies: `fn`
//! (`x * a + b` on 16 values, no module) and `linear` (one 16×16 `Linear` shared by every region,
//! then `tanh`). Each line gives µs per chain element (per region, or per body without regions),
//! the median of `--repeats` runs, plain and regions measured alternately in one process.
//!
//! Then the same bodies as the steps of one checkpointed scan (`Region::scan`: one node for
//! every step, the carry passed on, each step's input a slice of a sequence) against the loop
//! written out, µs per step; and a recurrent model whose regions pass their state on
//! (modern-lstm's network, `kits/models22/src/lstm.rs`: two layers, both directions), plain, a
//! region per cell call, and a scan per direction (every step's carry stored, and √T snapshots):
//! a step's time and its peak host memory (the counting allocator), `--lstm` sets its sizes.

use std::time::{Duration, Instant};

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use burn_checkpoint_22::memory::{CountingAllocator, Meter};
use burn_checkpoint_22::{Region, Schedule, checkpoint_fn};
use burn_checkpoint_22_models::lstm::LstmNetwork;
use burn_checkpoint_22_models::{Cut, initialised};
use clap::{Parser, ValueEnum};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

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
    /// Scan lengths (steps).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000")]
    scan_lengths: Vec<usize>,
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

/// A scan's cell without parameters (the `fn` body).
#[derive(Module, Debug)]
struct NoCell;

/// One scan of `length` steps, or (`scan` false) the loop it stands for: forward and backward
/// times. The carry is `[1, 16]`, each step's input a slice of a `[1, length, 16]` sequence. The
/// loop takes its inputs as `length` tensors of their own, made before the clock starts: cut from
/// the sequence inside the loop, each slice's gradient is sequence-sized in Burn (its backward
/// pads it with zeros), which makes the loop's backward quadratic in its length.
fn scan_chain(length: usize, body: Body, scan: bool, linear: &Linear) -> (Duration, Duration) {
    let device = Device::flex().autodiff();
    let h0 = Tensor::<2>::ones([1, 16], &device).require_grad();
    let xs = Tensor::<3>::zeros([1, length, 16], &device).require_grad();
    let steps: Vec<Tensor<2>> = if scan {
        Vec::new()
    } else {
        (0..length)
            .map(|_| Tensor::<2>::zeros([1, 16], &device).require_grad())
            .collect()
    };
    let fn_step = |_: &NoCell, h: Tensor<2>, x: Tensor<2>| {
        let h = h * 0.999 + x + 0.001;
        (h.clone(), h)
    };
    let linear_step = |linear: &Linear, h: Tensor<2>, x: Tensor<2>| {
        let h = (linear.forward(h) + x).tanh();
        (h.clone(), h)
    };
    let clock = Instant::now();
    let (ys, last) = match (body, scan) {
        (Body::Fn, true) => Region::named("fn").scan(&NoCell, h0.clone(), xs.clone(), 1, fn_step),
        (Body::Linear, true) => {
            Region::named("linear").scan(linear, h0.clone(), xs.clone(), 1, linear_step)
        }
        (_, false) => {
            let mut h = h0.clone();
            let mut ys = Vec::with_capacity(length);
            for x in steps.iter().cloned() {
                let (y, next) = match body {
                    Body::Fn => fn_step(&NoCell, h, x),
                    Body::Linear => linear_step(linear, h, x),
                };
                ys.push(y);
                h = next;
            }
            (Tensor::stack(ys, 1), h)
        }
    };
    let loss = ys.sum() + last.sum();
    let forward = clock.elapsed();
    let clock = Instant::now();
    let grads = loss.backward();
    let backward = clock.elapsed();
    assert!(h0.grad(&grads).is_some());
    (forward, backward)
}

/// How the recurrent model runs.
#[derive(Clone, Copy, Debug)]
enum Recurrence {
    Plain,
    /// A region per cell call.
    Regions,
    /// A scan per direction.
    Scan(Schedule),
}

/// One step of the recurrent model: forward and loss, then backward; its time and its peak host
/// bytes above its start.
fn recurrent_step(model: &LstmNetwork, x: &Tensor<3>, how: Recurrence) -> (Duration, u64) {
    let measure = Meter::Host.start();
    let clock = Instant::now();
    let output = match how {
        Recurrence::Plain => model.forward(x.clone(), Cut::None),
        Recurrence::Regions => model.forward(x.clone(), Cut::Regions),
        Recurrence::Scan(schedule) => model.forward_scan(x.clone(), schedule),
    };
    let loss = output.powf_scalar(2.0).mean();
    drop(loss.backward());
    (clock.elapsed(), measure.finish().in_use)
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
    println!();
    println!(
        "| Body | Scan steps | Loop forward | Scan forward | Loop backward | Scan backward | Backward above the loop |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &body in &args.bodies {
        for &length in &args.scan_lengths {
            let mut samples = [(); 4].map(|_| Vec::new());
            for _ in 0..args.repeats {
                for (offset, scan) in [(0, false), (2, true)] {
                    let (forward, backward) = scan_chain(length, body, scan, &linear);
                    samples[offset].push(forward);
                    samples[offset + 1].push(backward);
                }
            }
            let [pf, pb, sf, sb] = samples.map(|s| micros_per(median(s), length));
            println!(
                "| {body:?} | {length} | {pf:.1} µs | {sf:.1} µs | {pb:.1} µs | {sb:.1} µs | {:.1} µs |",
                sb - pb
            );
        }
    }
    let [seq, batch, hidden, layers] = args.lstm[..] else {
        panic!("--lstm takes four numbers: sequence length, batch, hidden units, layers");
    };
    device.seed(2);
    let model = initialised(LstmNetwork::new(1, hidden, layers, true, 0.0, 1, &device));
    let x = LstmNetwork::sequences(batch, seq, 1, &device);
    let snapshots = (seq as f64).sqrt().round() as usize;
    let methods = [
        ("plain".to_string(), Recurrence::Plain),
        (
            format!("a region per cell call ({} regions)", seq * layers * 2),
            Recurrence::Regions,
        ),
        (
            "a scan per direction, every step's carry stored".to_string(),
            Recurrence::Scan(Schedule::EveryStep),
        ),
        (
            format!("a scan per direction, {snapshots} snapshots (√T)"),
            Recurrence::Scan(Schedule::Snapshots(snapshots)),
        ),
    ];
    let mut samples: Vec<(Vec<Duration>, Vec<u64>)> =
        methods.iter().map(|_| Default::default()).collect();
    for round in 0..=args.repeats {
        for ((_, how), (times, peaks)) in methods.iter().zip(&mut samples) {
            let (time, peak) = recurrent_step(&model, &x, *how);
            // The first round warms up.
            if round > 0 {
                times.push(time);
                peaks.push(peak);
            }
        }
    }
    let measured: Vec<(Duration, u64)> = samples
        .into_iter()
        .map(|(times, mut peaks)| {
            peaks.sort();
            (median(times), peaks[peaks.len() / 2])
        })
        .collect();
    let (plain_time, plain_peak) = measured[0];
    println!();
    println!(
        "modern-lstm, seq {seq}, batch {batch}, hidden {hidden}, {layers} layers both ways (medians of {} steps)",
        args.repeats
    );
    println!();
    println!("| Method | Step | × plain | Peak memory | × plain |");
    println!("|---|---|---|---|---|");
    for ((name, _), (time, peak)) in methods.iter().zip(measured) {
        println!(
            "| {name} | {:.1} ms | {:.2} | {:.1} MiB | {:.2} |",
            time.as_secs_f64() * 1e3,
            time.as_secs_f64() / plain_time.as_secs_f64(),
            peak as f64 / (1 << 20) as f64,
            peak as f64 / plain_peak as f64
        );
    }
}
