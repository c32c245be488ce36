//! Several machines, over loopback: an orchestrator process and two node processes, each a
//! `DataParallel` of two CPU workers with checkpoint regions, trained several steps with SGD and
//! with Adam. Every node ends with the parameters of one process training on the whole batch;
//! a node that is killed, or that hangs, stops the other with an error naming it. On wgpu, two
//! nodes end with the same parameters run after run.
//!
//! The processes are this test binary run again with `MULTINODE_ROLE` set (the `role` test
//! below does their work); each test kills whatever it started when it ends, passed or not.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use burn::module::AutodiffModule;
use burn::optim::{AdamConfig, GradientsParams, Optimizer, SgdConfig, momentum::MomentumConfig};
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint_parallel::{DataParallel, DataParallelConfig, Nodes, run_orchestrator};
use common::Ckpt;
use common::cubecl::{Deep, Spread, TOLERANCE, deep_mse, own_autotune_cache};
use common::mlp::{BATCH, Batch, LR, Mlp, STEPS, assert_close, batch, mse, shards, tensors};
use serde::{Deserialize, Serialize};

const WORKERS: usize = 2;
const NODES: usize = 2;

/// What a node process writes when it ends.
#[derive(Debug, Serialize, Deserialize)]
struct Outcome {
    params: Option<Vec<Vec<f32>>>,
    error: Option<String>,
    /// Errors of steps the node went on after (with `MULTINODE_FAIL_AT`).
    step_errors: Vec<String>,
    /// Each step's time, in seconds.
    step_seconds: Vec<f64>,
}

// ------------------------------------------------------------------------------------------
// The processes

/// The work of a process this binary was started as; nothing when run as a test.
#[test]
fn role() {
    let Ok(role) = std::env::var("MULTINODE_ROLE") else {
        return;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
    match role.as_str() {
        "orchestrator" => {
            run_orchestrator(var("MULTINODE_PORT").parse().unwrap()).unwrap();
            std::process::exit(0);
        }
        "node" => {
            let backend = std::env::var("MULTINODE_BACKEND").unwrap_or_default();
            // A run on wgpu tunes its kernels from scratch, as a user's first run does.
            let cache = (backend == "wgpu").then(|| own_autotune_cache("multinode"));
            let outcome = node(
                &backend,
                var("MULTINODE_RANK").parse().unwrap(),
                &var("MULTINODE_ORCHESTRATOR"),
                var("MULTINODE_DATA_PORT").parse().unwrap(),
                &var("MULTINODE_OPTIMIZER"),
                Duration::from_millis(var("MULTINODE_TIMEOUT_MS").parse().unwrap()),
                Trouble {
                    hang_at: std::env::var("MULTINODE_HANG_AT").ok().map(|s| {
                        let (step, marker) = s.split_once(':').unwrap();
                        (step.parse().unwrap(), PathBuf::from(marker))
                    }),
                    fail_at: std::env::var("MULTINODE_FAIL_AT").ok().map(|s| {
                        let (rank, step) = s.split_once(':').unwrap();
                        (rank.parse().unwrap(), step.parse().unwrap())
                    }),
                },
            );
            if let Some(cache) = cache {
                let _ = std::fs::remove_dir_all(cache);
            }
            let out = var("MULTINODE_OUT");
            std::fs::write(out, serde_json::to_vec(&outcome).unwrap()).unwrap();
            std::process::exit(0);
        }
        other => panic!("unknown role {other}"),
    }
}

/// What a node process is told to go through.
#[derive(Clone, Default)]
struct Trouble {
    /// At this step, the loss function writes the marker file and never returns.
    hang_at: Option<(usize, PathBuf)>,
    /// Node `.0`'s loss function panics at step `.1`; every node told so goes on after a
    /// failed step.
    fail_at: Option<(usize, usize)>,
}

/// Burn's wgpu backend without fusion, plain autodiff: where two workers on one device raced
/// most, when they shared parameter buffers (tests/wgpu.rs runs the other variants in one process).
type OnWgpu = burn::backend::Autodiff<bench_kit::wgpu::Unfused>;

/// Node `rank`: its half of every batch, cut into one shard per worker; on NdArray (the MLP, a
/// region around its body), or on `wgpu` (the deep model, SGD).
fn node(
    backend: &str,
    rank: usize,
    orchestrator: &str,
    data_port: u16,
    optimizer: &str,
    timeout: Duration,
    trouble: Trouble,
) -> Outcome {
    let nodes = Nodes::new(rank, NODES, orchestrator, "127.0.0.1", data_port);
    let config = DataParallelConfig::new()
        .with_nodes(nodes)
        .with_timeout(timeout);
    let mlp = |device: &_| Mlp::<Ckpt>::new(device, true);
    match (backend, optimizer) {
        ("wgpu", _) => train(
            rank,
            config,
            |device| Deep::<OnWgpu>::new(device, false),
            deep_mse,
            sgd,
            trouble,
        ),
        (_, "sgd") => train(rank, config, mlp, mse, sgd, trouble),
        _ => train(rank, config, mlp, mse, adam, trouble),
    }
}

fn sgd<B: AutodiffBackend, M: AutodiffModule<B>>() -> impl Optimizer<M, B> {
    SgdConfig::new()
        .with_momentum(Some(MomentumConfig::new().with_momentum(0.9)))
        .init()
}

fn adam<B: AutodiffBackend, M: AutodiffModule<B>>() -> impl Optimizer<M, B> {
    AdamConfig::new().init()
}

/// The loss of a model on a shard.
type Loss<M, B> = fn(&M, Batch<B>) -> Tensor<B, 1>;

fn train<B, M, O>(
    rank: usize,
    config: DataParallelConfig,
    model: impl Fn(&B::Device) -> M,
    loss: Loss<M, B>,
    optimizer: fn() -> O,
    trouble: Trouble,
) -> Outcome
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + 'static,
    M::InnerModule: 'static,
    O: Optimizer<M, B> + 'static,
{
    let device = B::Device::default();
    let devices = vec![device.clone(); WORKERS];
    let mut step_seconds = Vec::new();
    let mut step_errors = Vec::new();
    let failed = |error: String, step_seconds| Outcome {
        params: None,
        error: Some(error),
        step_errors: Vec::new(),
        step_seconds,
    };
    let mut dp =
        match DataParallel::with_config(devices.clone(), model(&device), optimizer(), LR, config) {
            Ok(dp) => dp,
            Err(error) => return failed(error.to_string(), step_seconds),
        };
    for step in 0..STEPS {
        let (x, y) = batch::<B>(step, &device);
        let half = BATCH / NODES;
        let part = (
            x.narrow(0, rank * half, half),
            y.narrow(0, rank * half, half),
        );
        let shards = common::mlp::split(part, &devices);
        let hang = trouble.hang_at.clone().filter(|(at, _)| *at == step);
        let fail = trouble.fail_at == Some((rank, step));
        let start = Instant::now();
        let result = dp.step(shards, move |model: &M, shard| {
            assert!(!fail, "told to fail at step {step}");
            if let Some((_, marker)) = &hang {
                // Stand for a node that stops answering: say so, then never return.
                std::fs::write(marker, b"hanging").unwrap();
                loop {
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
            loss(model, shard)
        });
        match result {
            Err(error) if trouble.fail_at.is_some() => step_errors.push(error.to_string()),
            Err(error) => return failed(error.to_string(), step_seconds),
            Ok(_) => step_seconds.push(start.elapsed().as_secs_f64()),
        }
    }
    match dp.into_model() {
        Ok(model) => Outcome {
            params: Some(tensors(&model)),
            error: None,
            step_errors,
            step_seconds,
        },
        Err(error) => failed(error.to_string(), step_seconds),
    }
}

// ------------------------------------------------------------------------------------------
// The test's side

/// A free port `p` with `p + 1` free too (the orchestrator and its rendezvous).
fn free_ports(count: u16) -> u16 {
    loop {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let first = probe.local_addr().unwrap().port();
        drop(probe);
        if first.checked_add(count).is_none() {
            continue;
        }
        if (first..first + count).all(|p| TcpListener::bind(("0.0.0.0", p)).is_ok()) {
            return first;
        }
    }
}

/// The processes a test started: killed when it ends, however it ends.
struct Run {
    /// `MULTINODE_BACKEND` of its nodes.
    backend: &'static str,
    dir: PathBuf,
    children: Vec<Child>,
    orchestrator: String,
    data_port: u16,
}

impl Run {
    fn start() -> Run {
        Run::start_on("ndarray")
    }

    /// An orchestrator whose nodes will train on `backend` (`ndarray` or `wgpu`).
    fn start_on(backend: &'static str) -> Run {
        let base = free_ports(4);
        let dir = std::env::temp_dir().join(format!("multinode-{}-{base}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut run = Run {
            backend,
            dir,
            children: Vec::new(),
            orchestrator: format!("127.0.0.1:{base}"),
            data_port: base + 2,
        };
        run.spawn(&[
            ("MULTINODE_ROLE", "orchestrator".into()),
            ("MULTINODE_PORT", base.to_string()),
        ]);
        run
    }

    fn spawn(&mut self, vars: &[(&str, String)]) -> usize {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "role", "--nocapture", "--test-threads=1"])
            .stdin(Stdio::null())
            // burn-collective prints a line on every connection to the orchestrator.
            .stdout(Stdio::null());
        for (name, value) in vars {
            command.env(name, value);
        }
        self.children.push(command.spawn().unwrap());
        self.children.len() - 1
    }

    /// Starts node `rank`; returns its child index and where it writes its outcome.
    fn node(
        &mut self,
        rank: usize,
        optimizer: &str,
        timeout: Duration,
        hang_at: Option<usize>,
        fail_at: Option<(usize, usize)>,
    ) -> (usize, PathBuf) {
        let out = self.dir.join(format!("node-{rank}.json"));
        let mut vars = vec![
            ("MULTINODE_ROLE", "node".to_string()),
            ("MULTINODE_BACKEND", self.backend.to_string()),
            ("MULTINODE_RANK", rank.to_string()),
            ("MULTINODE_ORCHESTRATOR", self.orchestrator.clone()),
            (
                "MULTINODE_DATA_PORT",
                (self.data_port + rank as u16).to_string(),
            ),
            ("MULTINODE_OPTIMIZER", optimizer.to_string()),
            ("MULTINODE_TIMEOUT_MS", timeout.as_millis().to_string()),
            ("MULTINODE_OUT", out.display().to_string()),
        ];
        if let Some(step) = hang_at {
            vars.push((
                "MULTINODE_HANG_AT",
                format!("{step}:{}", self.marker().display()),
            ));
        }
        if let Some((rank, step)) = fail_at {
            vars.push(("MULTINODE_FAIL_AT", format!("{rank}:{step}")));
        }
        (self.spawn(&vars), out)
    }

    fn marker(&self) -> PathBuf {
        self.dir.join("hanging")
    }

    /// Waits for child `index` to exit, at most `limit`; its outcome.
    fn outcome(&mut self, index: usize, out: &Path, limit: Duration) -> Outcome {
        let start = Instant::now();
        loop {
            if let Some(status) = self.children[index].try_wait().unwrap() {
                let text = std::fs::read(out).unwrap_or_else(|_| {
                    panic!(
                        "node process exited ({status}) without writing {}",
                        out.display()
                    )
                });
                return serde_json::from_slice(&text).unwrap();
            }
            assert!(
                start.elapsed() < limit,
                "a node process ran past {limit:?}: something hangs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `path` exists, at most `limit`.
    fn wait_for(&self, path: &Path, limit: Duration) {
        let start = Instant::now();
        while !path.exists() {
            assert!(start.elapsed() < limit, "{} never appeared", path.display());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `STEPS` steps of one process on the whole batch, but `skip`.
fn one_process<B: AutodiffBackend, M: AutodiffModule<B>, O: Optimizer<M, B>>(
    mut model: M,
    loss: Loss<M, B>,
    mut optimizer: O,
    skip: Option<usize>,
) -> Vec<Vec<f32>> {
    let device = B::Device::default();
    for step in (0..STEPS).filter(|s| Some(*s) != skip) {
        let loss = loss(&model, batch::<B>(step, &device));
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(LR, model, grads);
    }
    tensors(&model)
}

/// [`one_process`] with the MLP and a region around its body.
fn one_process_mlp<O: Optimizer<Mlp<Ckpt>, Ckpt>>(
    optimizer: O,
    skip: Option<usize>,
) -> Vec<Vec<f32>> {
    let model = Mlp::<Ckpt>::new(&Default::default(), true);
    one_process(model, mse, optimizer, skip)
}

/// Mean seconds per step of the same four workers in one process (the cost's reference).
fn four_workers_in_one_process<O: Optimizer<Mlp<Ckpt>, Ckpt> + 'static>(optimizer: O) -> f64 {
    let device = Default::default();
    let devices = vec![device; NODES * WORKERS];
    let mut dp = DataParallel::new(
        devices.clone(),
        Mlp::<Ckpt>::new(&device, true),
        optimizer,
        LR,
    )
    .unwrap();
    let mut seconds = Vec::new();
    for step in 0..STEPS {
        let start = Instant::now();
        dp.step(shards::<Ckpt>(step, &devices), mse::<Ckpt>)
            .unwrap();
        seconds.push(start.elapsed().as_secs_f64());
    }
    mean_after_first(&seconds)
}

/// The first step opens the sessions and warms the caches: left out.
fn mean_after_first(seconds: &[f64]) -> f64 {
    let rest = &seconds[1.min(seconds.len())..];
    rest.iter().sum::<f64>() / rest.len().max(1) as f64
}

fn two_nodes_match_one_process<O: Optimizer<Mlp<Ckpt>, Ckpt> + 'static>(
    optimizer: &str,
    make: fn() -> O,
) {
    let _alone = common::alone();
    let mut run = Run::start();
    let limit = Duration::from_secs(120);
    let nodes: Vec<_> = (0..NODES)
        .map(|rank| run.node(rank, optimizer, Duration::from_secs(60), None, None))
        .collect();
    let outcomes: Vec<Outcome> = nodes
        .iter()
        .map(|(index, out)| run.outcome(*index, out, limit))
        .collect();
    let expected = one_process_mlp(make(), None);
    for (rank, outcome) in outcomes.iter().enumerate() {
        assert_eq!(outcome.error, None, "node {rank} failed");
        let params = outcome.params.as_ref().expect("parameters");
        assert_close(params, &expected, 1e-5);
        assert_eq!(
            params,
            outcomes[0].params.as_ref().unwrap(),
            "node {rank} differs from node 0"
        );
    }
    let nodes_step = mean_after_first(&outcomes[0].step_seconds);
    let local_step = four_workers_in_one_process(make());
    println!(
        "{optimizer}: 2 nodes x {WORKERS} workers over loopback {:.1} ms per step; the same 4 \
         workers in one process {:.1} ms per step",
        nodes_step * 1e3,
        local_step * 1e3
    );
}

#[test]
fn two_nodes_with_sgd_match_one_process() {
    two_nodes_match_one_process("sgd", sgd::<Ckpt, Mlp<Ckpt>>);
}

#[test]
fn two_nodes_with_adam_match_one_process() {
    two_nodes_match_one_process("adam", adam::<Ckpt, Mlp<Ckpt>>);
}

/// Node 1 stops answering at step 2; node 0 either sees it die (`kill`) or times out.
fn node_1_stops(kill: bool) -> (String, Duration) {
    let mut run = Run::start();
    let timeout = if kill {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(3)
    };
    let (first, first_out) = run.node(0, "sgd", timeout, None, None);
    let (_, _) = run.node(1, "sgd", timeout, Some(2), None);
    run.wait_for(&run.marker(), Duration::from_secs(60));
    let start = Instant::now();
    if kill {
        run.children[2].kill().unwrap();
    }
    let outcome = run.outcome(first, &first_out, Duration::from_secs(60));
    let error = outcome.error.expect("node 0 fails");
    (error, start.elapsed())
}

#[test]
fn a_killed_node_stops_the_other_at_once() {
    let _alone = common::alone();
    let (error, after) = node_1_stops(true);
    println!("node 0, {after:?} after node 1 was killed: {error}");
    assert!(
        error.contains("node 1 (ws://127.0.0.1:") && error.contains("gone"),
        "{error}"
    );
    assert!(
        after < Duration::from_secs(30),
        "noticed after {after:?}, not at once"
    );
}

#[test]
fn a_hanging_node_times_the_other_out_naming_it() {
    let _alone = common::alone();
    let (error, after) = node_1_stops(false);
    println!("node 0, {after:?} after node 1 hung: {error}");
    assert!(
        error.contains("timed out after 3s") && error.contains("node 1 (ws://127.0.0.1:"),
        "{error}"
    );
}

#[test]
fn a_failing_step_on_one_node_is_dropped_on_both_and_training_goes_on() {
    let _alone = common::alone();
    let mut run = Run::start();
    let timeout = Duration::from_secs(60);
    let nodes = [
        run.node(0, "sgd", timeout, None, Some((1, 1))),
        run.node(1, "sgd", timeout, None, Some((1, 1))),
    ];
    let outcomes: Vec<Outcome> = nodes
        .iter()
        .map(|(index, out)| run.outcome(*index, out, Duration::from_secs(120)))
        .collect();
    println!("node 0's step 1: {:?}", outcomes[0].step_errors);
    println!("node 1's step 1: {:?}", outcomes[1].step_errors);
    assert!(
        outcomes[0].step_errors.len() == 1
            && outcomes[0].step_errors[0].contains("node 1 (ws://127.0.0.1:")
            && outcomes[0].step_errors[0].contains("told to fail at step 1"),
        "{:?}",
        outcomes[0].step_errors
    );
    assert!(
        outcomes[1].step_errors.len() == 1
            && outcomes[1].step_errors[0].contains("told to fail at step 1"),
        "{:?}",
        outcomes[1].step_errors
    );
    let expected = one_process_mlp(sgd::<Ckpt, Mlp<Ckpt>>(), Some(1));
    for outcome in &outcomes {
        assert_eq!(outcome.error, None);
        assert_close(outcome.params.as_ref().unwrap(), &expected, 1e-5);
    }
    assert_eq!(outcomes[0].params, outcomes[1].params);
}

/// Two nodes of two workers each on wgpu (one device listed twice per node, the deep model),
/// `bench_kit::repeats(2)` runs (`scripts/soak` runs more), each in fresh processes with empty
/// autotune caches: every node of every run ends with the first's parameters bit for bit, and
/// within float reassociation of one process on the whole batch. Before each worker got buffers of
/// its own, the two workers of a node raced on shared parameter buffers: 2 of 8 nodes' parameters
/// differed from the first run's (largest 0.28).
#[test]
fn two_nodes_on_wgpu_end_the_same_every_run() {
    let Some(_device) = bench_kit::wgpu::claim() else {
        return;
    };
    let _alone = common::alone();
    let runs = bench_kit::repeats(2);
    let mut trained = Vec::new();
    for _ in 0..runs {
        let mut run = Run::start_on("wgpu");
        let nodes: Vec<_> = (0..NODES)
            .map(|rank| run.node(rank, "sgd", Duration::from_secs(120), None, None))
            .collect();
        for (rank, (index, out)) in nodes.iter().enumerate() {
            let outcome = run.outcome(*index, out, Duration::from_secs(300));
            assert_eq!(outcome.error, None, "node {rank} failed");
            trained.push(outcome.params.expect("parameters"));
        }
    }
    let reference = one_process(
        Deep::<OnWgpu>::new(&Default::default(), false),
        deep_mse,
        sgd::<OnWgpu, Deep<OnWgpu>>(),
        None,
    );
    let spread = Spread::of(&trained, &reference);
    println!(
        "wgpu, {runs} runs of {NODES} nodes x {WORKERS} workers: {} of {} nodes' parameters differ \
         from the first (largest {:e}); at most {:e} from the whole-batch reference",
        spread.differing.len(),
        trained.len(),
        spread.worst(),
        spread.from_reference,
    );
    assert!(
        spread.differing.is_empty(),
        "runs differ: {:?}",
        spread.differing
    );
    assert!(
        spread.from_reference <= TOLERANCE,
        "{:e} from the whole-batch reference",
        spread.from_reference
    );
}
