//! NdArray against burn-flex on the CPU: conv2d forward, `conv2d_x_backward` and
//! `conv2d_weight_backward` (the inner backend's `ModuleOps`, called directly) on DenseNet-BC-100
//! shapes at batch 16, a 1024×1024 matmul, and one forward + backward of a small dense block
//! through `Autodiff<_>`.
//!
//! Both backends run in one process, on the same shapes; each figure is the median of `--runs`
//! timed runs (at least 5) after one warm-up run. GFLOP/s counts 2·multiply-adds of a direct
//! convolution (the same count for the forward and for each of the two gradients).
//!
//! ```text
//! cargo bench -p densenet-bc --bench cpu_backend                    # all rows, release profile
//! cargo bench -p densenet-bc --bench cpu_backend -- --runs 9
//! cargo bench -p densenet-bc --bench cpu_backend --profile dev -- --fwd-only   # dev profile
//! cargo bench -p densenet-bc --bench cpu_backend -- --only autodiff --backend flex
//! ```
//!
//! `--only OP` (repeatable: `conv2d`, `conv2d_x_backward`, `conv2d_weight_backward`, `matmul`,
//! `autodiff`; `--fwd-only` is `--only conv2d`) and `--backend ndarray|flex` (repeatable) narrow
//! the run, e.g. to compare the dev profile (the workspace builds dependencies at opt-level 3
//! there) with release. Findings: `docs/cpu-backend.md`.

use std::time::{Duration, Instant};

use burn::backend::{Autodiff, Flex, NdArray};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::module::conv2d;
use burn::tensor::ops::{ConvOptions, FloatTensor};
use burn::tensor::{Distribution, Tensor};

/// Times Burn's NdArray and Flex CPU backends on DenseNet's convolution shapes, a matmul and an
/// autodiff step.
#[derive(clap::Parser)]
struct Args {
    /// Runs per figure (at least 5: a median of fewer is noise); each figure is their median.
    #[arg(long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(5..))]
    runs: usize,
    /// Time only this op (repeatable): conv2d, conv2d_x_backward, conv2d_weight_backward,
    /// matmul, autodiff. All when absent.
    #[arg(long)]
    only: Vec<String>,
    /// `--only conv2d`.
    #[arg(long)]
    fwd_only: bool,
    /// Time only this backend (repeatable). Both when absent.
    #[arg(long, value_enum)]
    backend: Vec<CpuBackend>,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
    /// The backends to time, by name: `NdArray`, `Flex`.
    #[arg(skip)]
    backends: Vec<&'static str>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CpuBackend {
    #[value(alias = "NdArray")]
    Ndarray,
    #[value(alias = "Flex")]
    Flex,
}

impl Args {
    fn parse() -> Args {
        let mut args: Args = clap::Parser::parse();
        if args.fwd_only {
            args.only.push("conv2d".into());
        }
        args.backends = args
            .backend
            .iter()
            .map(|backend| match backend {
                CpuBackend::Ndarray => "NdArray",
                CpuBackend::Flex => "Flex",
            })
            .collect();
        if args.backends.is_empty() {
            args.backends = vec!["NdArray", "Flex"];
        }
        args
    }

    fn wants(&self, op: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == op)
    }
}

/// A conv2d with stride 1, dilation 1 and "same" padding.
#[derive(Clone, Copy)]
struct Conv {
    what: &'static str,
    batch: usize,
    c_in: usize,
    c_out: usize,
    kernel: usize,
    size: usize,
}

impl Conv {
    fn flop(&self) -> f64 {
        2.0 * (self.batch * self.c_out * self.c_in * self.kernel * self.kernel) as f64
            * (self.size * self.size) as f64
    }

    fn shape(&self) -> String {
        format!(
            "b{} {}→{} {}×{} at {}×{}",
            self.batch, self.c_in, self.c_out, self.kernel, self.kernel, self.size, self.size
        )
    }

    fn options(&self) -> ConvOptions<2> {
        ConvOptions::new([1, 1], [self.kernel / 2; 2], [1, 1], 1)
    }
}

/// DenseNet-BC-100 (growth 12, CIFAR 32×32) at batch 16: the 3×3 conv of every dense layer
/// (48→12) and the 1×1 bottleneck of the last layer of each dense block, at each stage; the
/// first row is the shape of the figures that started this investigation.
const CONVS: [Conv; 7] = [
    Conv {
        what: "reference",
        batch: 8,
        c_in: 16,
        c_out: 16,
        kernel: 3,
        size: 32,
    },
    Conv {
        what: "stage 1 3×3",
        batch: 16,
        c_in: 48,
        c_out: 12,
        kernel: 3,
        size: 32,
    },
    Conv {
        what: "stage 1 1×1",
        batch: 16,
        c_in: 192,
        c_out: 48,
        kernel: 1,
        size: 32,
    },
    Conv {
        what: "stage 2 3×3",
        batch: 16,
        c_in: 48,
        c_out: 12,
        kernel: 3,
        size: 16,
    },
    Conv {
        what: "stage 2 1×1",
        batch: 16,
        c_in: 288,
        c_out: 48,
        kernel: 1,
        size: 16,
    },
    Conv {
        what: "stage 3 3×3",
        batch: 16,
        c_in: 48,
        c_out: 12,
        kernel: 3,
        size: 8,
    },
    Conv {
        what: "stage 3 1×1",
        batch: 16,
        c_in: 330,
        c_out: 48,
        kernel: 1,
        size: 8,
    },
];

/// One measured row: what was timed, its FLOP count, and the median time on each backend.
struct Row {
    op: String,
    shape: String,
    flop: f64,
    times: Vec<Duration>,
}

/// Median of `runs` timed calls of `f`, after one warm-up call.
fn median<B: Backend>(runs: usize, device: &B::Device, mut f: impl FnMut()) -> Duration {
    f();
    B::sync(device).unwrap();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            B::sync(device).unwrap();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn random<B: Backend>(shape: [usize; 4], device: &B::Device) -> FloatTensor<B> {
    Tensor::<B, 4>::random(shape, Distribution::Normal(0.0, 1.0), device)
        .into_primitive()
        .tensor()
}

/// Median times of conv2d forward, x-gradient and weight-gradient for `conv` on `B`.
fn conv_times<B: Backend>(conv: &Conv, args: &Args) -> [Option<Duration>; 3] {
    let device = Default::default();
    let Conv {
        batch,
        c_in,
        c_out,
        kernel,
        size,
        ..
    } = *conv;
    let x = random::<B>([batch, c_in, size, size], &device);
    let w = random::<B>([c_out, c_in, kernel, kernel], &device);
    let gy = random::<B>([batch, c_out, size, size], &device);
    let options = conv.options();

    let forward = args.wants("conv2d").then(|| {
        median::<B>(args.runs, &device, || {
            drop(B::conv2d(x.clone(), w.clone(), None, options.clone()))
        })
    });
    let x_backward = args.wants("conv2d_x_backward").then(|| {
        median::<B>(args.runs, &device, || {
            drop(B::conv2d_x_backward(
                x.clone(),
                w.clone(),
                gy.clone(),
                options.clone(),
            ))
        })
    });
    let weight_backward = args.wants("conv2d_weight_backward").then(|| {
        median::<B>(args.runs, &device, || {
            drop(B::conv2d_weight_backward(
                x.clone(),
                w.clone(),
                gy.clone(),
                options.clone(),
            ))
        })
    });
    [forward, x_backward, weight_backward]
}

const MATMUL: usize = 1024;

fn matmul_time<B: Backend>(args: &Args) -> Duration {
    let device = Default::default();
    let a = Tensor::<B, 2>::random([MATMUL, MATMUL], Distribution::Normal(0.0, 1.0), &device)
        .into_primitive()
        .tensor();
    let b = Tensor::<B, 2>::random([MATMUL, MATMUL], Distribution::Normal(0.0, 1.0), &device)
        .into_primitive()
        .tensor();
    median::<B>(args.runs, &device, || {
        drop(B::float_matmul(a.clone(), b.clone()))
    })
}

/// The small conv stack: a 4-layer dense block of DenseNet-BC at 32×32, batch 16, growth 12,
/// 24 input channels; layer `i` is `conv3×3(relu(conv1×1(relu(cat(features)))))` with
/// `24 + 12·i → 48 → 12` channels.
const STACK_LAYERS: usize = 4;
const STACK_IN: usize = 24;

fn stack_convs() -> Vec<Conv> {
    (0..STACK_LAYERS)
        .flat_map(|i| {
            let c_in = STACK_IN + 12 * i;
            [
                Conv {
                    what: "",
                    batch: 16,
                    c_in,
                    c_out: 48,
                    kernel: 1,
                    size: 32,
                },
                Conv {
                    what: "",
                    batch: 16,
                    c_in: 48,
                    c_out: 12,
                    kernel: 3,
                    size: 32,
                },
            ]
        })
        .collect()
}

fn stack_time<B: Backend>(args: &Args) -> Duration {
    type A<B> = Autodiff<B>;
    let device = Default::default();
    let convs = stack_convs();
    let weights: Vec<Tensor<A<B>, 4>> = convs
        .iter()
        .map(|c| {
            Tensor::random(
                [c.c_out, c.c_in, c.kernel, c.kernel],
                Distribution::Normal(0.0, 0.1),
                &device,
            )
            .require_grad()
        })
        .collect();
    let x = Tensor::<A<B>, 4>::random(
        [16, STACK_IN, 32, 32],
        Distribution::Normal(0.0, 1.0),
        &device,
    );
    median::<B>(args.runs, &device, || {
        let mut features = vec![x.clone()];
        for (pair, layer) in weights.chunks(2).zip(convs.chunks(2)) {
            let h = relu(Tensor::cat(features.clone(), 1));
            let h = conv2d(h, pair[0].clone(), None, layer[0].options());
            let h = conv2d(relu(h), pair[1].clone(), None, layer[1].options());
            features.push(h);
        }
        let grads = Tensor::cat(features, 1).sum().backward();
        assert!(weights[0].grad(&grads).is_some());
    })
}

fn measure<B: Backend>(args: &Args) -> Vec<(String, String, f64, Duration)> {
    let mut out = Vec::new();
    for conv in &CONVS {
        let ops = ["conv2d", "conv2d_x_backward", "conv2d_weight_backward"];
        for (op, time) in ops.iter().zip(conv_times::<B>(conv, args)) {
            if let Some(time) = time {
                let shape = format!("{} ({})", conv.shape(), conv.what);
                out.push((op.to_string(), shape, conv.flop(), time));
            }
        }
    }
    if args.wants("matmul") {
        let flop = 2.0 * (MATMUL as f64).powi(3);
        let shape = format!("{MATMUL}×{MATMUL} · {MATMUL}×{MATMUL}");
        out.push(("matmul".into(), shape, flop, matmul_time::<B>(args)));
    }
    if args.wants("autodiff") {
        // The stack's count: forward + both gradients of every conv (relu and cat not counted).
        let flop = 3.0 * stack_convs().iter().map(Conv::flop).sum::<f64>();
        let shape = format!("{STACK_LAYERS}-layer dense block, b16 32×32, {STACK_IN}+12·i→48→12");
        out.push((
            "Autodiff fwd+bwd".into(),
            shape,
            flop,
            stack_time::<B>(args),
        ));
    }
    out
}

fn main() {
    let args = Args::parse();
    let profile = if cfg!(debug_assertions) {
        "debug assertions on (dev profile)"
    } else {
        "debug assertions off (release profile)"
    };
    println!(
        "cpu_backend: {} runs per figure (median, after a warm-up), {profile}, {} threads available",
        args.runs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let mut rows: Vec<Row> = Vec::new();
    for (i, &backend) in args.backends.iter().enumerate() {
        eprintln!("measuring {backend}...");
        let measured = match backend {
            "NdArray" => measure::<NdArray>(&args),
            _ => measure::<Flex>(&args),
        };
        for (j, (op, shape, flop, time)) in measured.into_iter().enumerate() {
            eprintln!("  {op} {shape}: {:.2} ms", time.as_secs_f64() * 1e3);
            if i == 0 {
                rows.push(Row {
                    op,
                    shape,
                    flop,
                    times: vec![time],
                });
            } else {
                rows[j].times.push(time);
            }
        }
    }

    let both = args.backends.len() == 2;
    println!();
    let mut header = "| op | shape | GFLOP |".to_string();
    let mut rule = "|---|---|---:|".to_string();
    for backend in &args.backends {
        header += &format!(" {backend} ms | {backend} GFLOP/s |");
        rule += "---:|---:|";
    }
    if both {
        header += &format!(" {}/{} time |", args.backends[1], args.backends[0]);
        rule += "---:|";
    }
    println!("{header}");
    println!("{rule}");
    for row in &rows {
        let mut line = format!("| {} | {} | {:.3} |", row.op, row.shape, row.flop / 1e9);
        for t in &row.times {
            let rate = row.flop / t.as_secs_f64() / 1e9;
            line += &format!(" {:.2} | {:.2} |", t.as_secs_f64() * 1e3, rate);
        }
        if both {
            let ratio = row.times[1].as_secs_f64() / row.times[0].as_secs_f64();
            line += &format!(" {ratio:.3} |");
        }
        println!("{line}");
    }
}
