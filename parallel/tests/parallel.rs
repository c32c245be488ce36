//! `DataParallel` on NdArray, several worker threads on the one CPU device, real burn-collective
//! all-reduce: replicas stay bitwise equal and follow a one-device run on the whole batch;
//! bucketing, strategies and checkpoint regions change nothing; failures come back as errors.
//!
//! Every test runs its `DataParallel` in a helper thread with a deadline, so a hang fails the
//! test instead of stalling the suite; and the tests take turns, because burn-collective allows
//! one session per backend type in a process.

mod common;

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use burn::module::{AutodiffModule, Module};
use burn::nn::{BatchNorm, BatchNormConfig, Linear};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{
    AdamConfig, GradientsParams, LearningRate, MultiGradientsParams, Optimizer, SgdConfig,
};
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn_checkpoint_parallel::{
    AllReduceStrategy, DataParallel, DataParallelConfig, ParallelError, split_batch,
};
use common::mlp::{
    Batch, HIDDEN, INPUT, LR, Mlp, OUTPUT, STEPS, assert_close, batch, linear, mse, shards, tensors,
};
use common::{Ckpt, Plain};

/// Runs `f` in a thread and waits at most two minutes for it.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(f());
    });
    match receiver.recv_timeout(Duration::from_secs(120)) {
        Ok(value) => value,
        Err(RecvTimeoutError::Timeout) => panic!("no answer within 120 s: something hangs"),
        Err(RecvTimeoutError::Disconnected) => panic!("the test body panicked (see above)"),
    }
}

/// Each worker's replica's tensors.
fn replicas<B, M, O>(dp: &mut DataParallel<B, M, O>) -> Vec<Vec<Vec<f32>>>
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + 'static,
    M::InnerModule: 'static,
    O: Optimizer<M, B> + 'static,
{
    let n = dp.devices().len();
    dp.evaluate(vec![(); n], |model: &M::InnerModule, ()| tensors(model))
        .unwrap()
}

fn bits(tensors: &[Vec<f32>]) -> Vec<Vec<u32>> {
    tensors
        .iter()
        .map(|t| t.iter().map(|v| v.to_bits()).collect())
        .collect()
}

fn assert_replicas_equal(replicas: &[Vec<Vec<f32>>]) {
    for (i, replica) in replicas.iter().enumerate().skip(1) {
        assert_eq!(
            bits(replica),
            bits(&replicas[0]),
            "replica {i} differs from replica 0"
        );
    }
}

/// `STEPS` steps on one device with the whole batch.
fn one_device<B: AutodiffBackend, O: Optimizer<Mlp<B>, B>>(
    mut model: Mlp<B>,
    mut optimizer: O,
) -> Vec<Vec<f32>> {
    let device = Default::default();
    for step in 0..STEPS {
        let loss = mse(&model, batch::<B>(step, &device));
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(LR, model, grads);
    }
    tensors(&model)
}

/// `STEPS` data-parallel steps on `workers` threads against the one-device run: replicas equal
/// bit for bit, and within `1e-5` of the one-device parameters. Returns the parameters.
fn matches_one_device<B, O>(
    workers: usize,
    region: bool,
    optimizer: impl Fn() -> O + Send + 'static,
    config: DataParallelConfig,
) -> Vec<Vec<f32>>
where
    B: AutodiffBackend,
    O: Optimizer<Mlp<B>, B> + 'static,
{
    let _alone = common::alone();
    within(move || {
        let device: B::Device = Default::default();
        let model = Mlp::<B>::new(&device, region);
        let expected = one_device(model.clone(), optimizer());
        let devices = vec![device; workers];
        let mut dp = DataParallel::with_config(devices.clone(), model, optimizer(), LR, config)
            .expect("workers start");
        for step in 0..STEPS {
            let loss = dp
                .step(shards::<B>(step, &devices), mse::<B>)
                .expect("a step");
            assert!(loss.is_finite());
        }
        let replicas = replicas(&mut dp);
        assert_replicas_equal(&replicas);
        assert_close(&replicas[0], &expected, 1e-5);
        let model = dp.into_model().expect("the model");
        assert_eq!(bits(&tensors(&model)), bits(&replicas[0]));
        replicas[0].clone()
    })
}

#[test]
fn one_worker_is_a_plain_training_loop() {
    matches_one_device::<Plain, _>(
        1,
        false,
        || AdamConfig::new().init(),
        DataParallelConfig::new(),
    );
}

#[test]
fn sgd_on_two_workers_matches_one_device() {
    matches_one_device::<Plain, _>(
        2,
        false,
        || SgdConfig::new().init(),
        DataParallelConfig::new(),
    );
}

#[test]
fn sgd_on_four_workers_matches_one_device() {
    matches_one_device::<Plain, _>(
        4,
        false,
        || SgdConfig::new().init(),
        DataParallelConfig::new(),
    );
}

#[test]
fn adam_on_two_workers_matches_one_device() {
    matches_one_device::<Plain, _>(
        2,
        false,
        || AdamConfig::new().init(),
        DataParallelConfig::new(),
    );
}

#[test]
fn adam_on_four_workers_matches_one_device() {
    matches_one_device::<Plain, _>(
        4,
        false,
        || AdamConfig::new().init(),
        DataParallelConfig::new(),
    );
}

#[test]
fn regions_with_sgd_on_two_and_four_workers_match_one_device() {
    for workers in [2, 4] {
        matches_one_device::<Ckpt, _>(
            workers,
            true,
            || SgdConfig::new().init(),
            DataParallelConfig::new(),
        );
    }
}

#[test]
fn regions_with_adam_on_two_and_four_workers_match_one_device() {
    for workers in [2, 4] {
        matches_one_device::<Ckpt, _>(
            workers,
            true,
            || AdamConfig::new().init(),
            DataParallelConfig::new(),
        );
    }
}

#[test]
fn regions_give_the_same_parameters_as_plain_autodiff() {
    let plain = matches_one_device::<Plain, _>(
        2,
        false,
        || AdamConfig::new().init(),
        DataParallelConfig::new(),
    );
    let regions = matches_one_device::<Ckpt, _>(
        2,
        true,
        || AdamConfig::new().init(),
        DataParallelConfig::new(),
    );
    assert_eq!(bits(&plain), bits(&regions));
}

#[test]
fn bucketed_and_unbucketed_give_the_same_parameters() {
    // Two workers: a sum of two values does not depend on the order burn-collective adds them in.
    let bucketed = matches_one_device::<Plain, _>(
        2,
        false,
        || AdamConfig::new().init(),
        DataParallelConfig::new(),
    );
    let unbucketed = matches_one_device::<Plain, _>(
        2,
        false,
        || AdamConfig::new().init(),
        DataParallelConfig::new().with_bucket_bytes(0),
    );
    // A bucket that holds exactly the first layer's weight and bias.
    let split = matches_one_device::<Plain, _>(
        2,
        false,
        || AdamConfig::new().init(),
        DataParallelConfig::new().with_bucket_bytes((INPUT * HIDDEN + HIDDEN) * 4),
    );
    assert_eq!(bits(&bucketed), bits(&unbucketed));
    assert_eq!(bits(&bucketed), bits(&split));
}

#[test]
fn every_strategy_matches_one_device() {
    for strategy in [
        AllReduceStrategy::Centralized,
        AllReduceStrategy::Tree(2),
        AllReduceStrategy::Tree(3),
        AllReduceStrategy::Ring,
    ] {
        for bucket_bytes in [0, 1 << 20] {
            matches_one_device::<Plain, _>(
                4,
                false,
                || SgdConfig::new().init(),
                DataParallelConfig::new()
                    .with_strategy(strategy)
                    .with_bucket_bytes(bucket_bytes),
            );
        }
    }
}

#[test]
fn calls_per_step_are_the_buckets() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 2];
        let model = Mlp::<Plain>::new(&devices[0], false);
        let config = DataParallelConfig::new().with_bucket_bytes(0);
        let mut dp = DataParallel::with_config(
            devices.clone(),
            model.clone(),
            SgdConfig::new().init(),
            LR,
            config,
        )
        .unwrap();
        assert_eq!(dp.all_reduce_calls_per_step(), 4, "one call per tensor");
        dp.step(shards::<Plain>(0, &devices), mse::<Plain>).unwrap();
        let stats = dp.last_stats().expect("stats");
        assert_eq!(stats.all_reduce_calls, 4);
        assert!(stats.step >= stats.compute && stats.step >= stats.all_reduce);
        assert!((0.0..=1.0).contains(&stats.all_reduce_share()));
        drop(dp);

        let mut dp =
            DataParallel::new(devices.clone(), model, SgdConfig::new().init(), LR).unwrap();
        dp.step(shards::<Plain>(0, &devices), mse::<Plain>).unwrap();
        let stats = dp.last_stats().expect("stats");
        assert_eq!(
            stats.all_reduce_calls, 1,
            "everything fits in one 25 MiB bucket"
        );
        // 195 floats, padded to 196 for two workers.
        assert_eq!(stats.all_reduce_bytes, 196 * 4);
    });
}

/// A network whose running statistics and frozen weights are tensors without gradient.
#[derive(Module, Debug)]
struct Normed<B: Backend> {
    norm: BatchNorm<B>,
    frozen: Linear<B>,
    head: Linear<B>,
    unused: Linear<B>,
}

impl<B: Backend> Normed<B> {
    fn new(device: &B::Device) -> Self {
        Normed {
            norm: BatchNormConfig::new(INPUT).init(device),
            frozen: linear::<B>(INPUT, HIDDEN, 5, device).no_grad(),
            head: linear(HIDDEN, OUTPUT, 7, device),
            unused: linear(OUTPUT, OUTPUT, 9, device),
        }
    }

    fn loss(&self, (x, y): Batch<B>) -> Tensor<B, 1> {
        let h = self.frozen.forward(self.norm.forward(x)).tanh();
        (self.head.forward(h) - y).powi_scalar(2).mean()
    }
}

#[test]
fn running_statistics_are_averaged_frozen_and_unused_weights_stay_exact() {
    let _alone = common::alone();
    within(|| {
        let device = Default::default();
        let devices = vec![device; 4];
        let model = Normed::<Plain>::new(&device);
        let before = model.clone().valid();
        // Weight decay would move a parameter that got a (zero) gradient; one that got none is
        // left alone by the optimizer.
        let optimizer = || {
            SgdConfig::new()
                .with_weight_decay(Some(WeightDecayConfig::new(0.1)))
                .init()
        };

        // Not a clone of `model`: a clone shares BatchNorm's running statistics.
        let mut reference = Normed::<Plain>::new(&device);
        let mut reference_optimizer = optimizer();
        for step in 0..STEPS {
            let loss = reference.loss(batch::<Plain>(step, &device));
            let grads = GradientsParams::from_grads(loss.backward(), &reference);
            reference = reference_optimizer.step(LR, reference, grads);
        }

        let mut dp = DataParallel::new(devices.clone(), model, optimizer(), LR).unwrap();
        for step in 0..STEPS {
            dp.step(shards::<Plain>(step, &devices), |m: &Normed<Plain>, b| {
                m.loss(b)
            })
            .unwrap();
        }
        assert_replicas_equal(&replicas(&mut dp));
        let trained = dp.into_model().unwrap();

        // The running mean depends only on the inputs: averaging each replica's change gives
        // the one-device running mean over the whole batch.
        let mean = |m: &Normed<Plain>| {
            m.norm
                .running_mean
                .value_sync()
                .into_data()
                .to_vec::<f32>()
                .unwrap()
        };
        let expected = mean(&reference);
        assert!(expected.iter().any(|v| *v != 0.0), "the running mean moved");
        assert_close(&[mean(&trained)], &[expected], 1e-6);
        let trained = trained.valid();
        assert_eq!(
            bits(&tensors(&trained.frozen)),
            bits(&tensors(&before.frozen))
        );
        assert_eq!(
            bits(&tensors(&trained.unused)),
            bits(&tensors(&before.unused))
        );
        assert_ne!(bits(&tensors(&trained.head)), bits(&tensors(&before.head)));
    });
}

fn on_worker(index: usize) -> bool {
    std::thread::current().name() == Some(&format!("data-parallel-{index}"))
}

#[test]
fn a_panicking_worker_stops_the_step_and_the_next_step_goes_on() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 2];
        let model = Mlp::<Ckpt>::new(&devices[0], true);
        let mut dp =
            DataParallel::new(devices.clone(), model, AdamConfig::new().init(), LR).unwrap();
        let before = replicas(&mut dp);
        let error = dp
            .step(shards::<Ckpt>(0, &devices), |model: &Mlp<Ckpt>, batch| {
                let loss = mse(model, batch);
                if on_worker(1) {
                    panic!("worker 1 fails on purpose");
                }
                loss
            })
            .unwrap_err();
        match &error {
            ParallelError::Panicked { worker: 1, message } => {
                assert!(message.contains("on purpose"), "{message}")
            }
            other => panic!("expected worker 1's panic, got {other}"),
        }
        assert_eq!(
            bits(&replicas(&mut dp)[0]),
            bits(&before[0]),
            "nothing was applied"
        );
        dp.step(shards::<Ckpt>(0, &devices), mse::<Ckpt>)
            .expect("the next step");
        let after = replicas(&mut dp);
        assert_replicas_equal(&after);
        assert_ne!(bits(&after[0]), bits(&before[0]));
    });
}

#[test]
fn an_erroring_worker_stops_the_step_and_running_statistics_are_restored() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 4];
        let model = Normed::<Plain>::new(&devices[0]);
        let mut dp =
            DataParallel::new(devices.clone(), model, SgdConfig::new().init(), LR).unwrap();
        let before = replicas(&mut dp);
        // Workers 0, 1 and 3 run their forward (and update their BatchNorm statistics) before
        // the step is called off.
        let error = dp
            .step(
                shards::<Plain>(0, &devices),
                |model: &Normed<Plain>, batch| {
                    let loss = model.loss(batch);
                    if on_worker(2) {
                        Err("no loss for this shard")
                    } else {
                        Ok(loss)
                    }
                },
            )
            .unwrap_err();
        match &error {
            ParallelError::Failed { worker: 2, source } => {
                assert_eq!(source.to_string(), "no loss for this shard")
            }
            other => panic!("expected worker 2's error, got {other}"),
        }
        let after = replicas(&mut dp);
        for (i, replica) in after.iter().enumerate() {
            assert_eq!(bits(replica), bits(&before[i]), "replica {i} changed");
        }
    });
}

#[test]
fn a_loss_of_several_values_is_refused() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 2];
        let model = Mlp::<Plain>::new(&devices[0], false);
        let mut dp =
            DataParallel::new(devices.clone(), model, SgdConfig::new().init(), LR).unwrap();
        let error = dp
            .step(
                shards::<Plain>(0, &devices),
                |model: &Mlp<Plain>, (x, _)| model.forward(x).reshape([-1]),
            )
            .unwrap_err();
        assert!(
            matches!(&error, ParallelError::LossNotScalar { shape, .. } if *shape == [8 * OUTPUT]),
            "{error}"
        );
    });
}

#[test]
fn shards_of_other_shapes_or_number_are_refused_before_any_work() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 2];
        let model = Mlp::<Plain>::new(&devices[0], false);
        let mut dp =
            DataParallel::new(devices.clone(), model, SgdConfig::new().init(), LR).unwrap();
        let before = replicas(&mut dp);
        let (x, y) = batch::<Plain>(0, &devices[0]);
        let uneven = vec![
            (x.clone().narrow(0, 0, 9), y.clone().narrow(0, 0, 9)),
            (x.clone().narrow(0, 9, 7), y.clone().narrow(0, 9, 7)),
        ];
        let error = dp.step(uneven, mse::<Plain>).unwrap_err();
        match &error {
            ParallelError::ShardShapes {
                worker: 1,
                expected,
                found,
            } => {
                assert_eq!(*expected, vec![vec![9, INPUT], vec![9, OUTPUT]]);
                assert_eq!(*found, vec![vec![7, INPUT], vec![7, OUTPUT]]);
            }
            other => panic!("expected a shape error, got {other}"),
        }
        let error = dp
            .step(vec![(x.clone(), y.clone())], mse::<Plain>)
            .unwrap_err();
        assert!(
            matches!(
                error,
                ParallelError::ShardCount {
                    expected: 2,
                    found: 1
                }
            ),
            "{error}"
        );
        assert!(matches!(
            split_batch(x, &[Default::default(); 3]),
            Err(ParallelError::Split { len: 16, parts: 3 })
        ));
        assert_eq!(bits(&replicas(&mut dp)[0]), bits(&before[0]));
        dp.step(shards::<Plain>(0, &devices), mse::<Plain>)
            .expect("a good step still works");
    });
}

/// An optimizer that panics on worker 1: a failure after the gradients were exchanged.
#[derive(Clone)]
struct PanicsOnWorker1<O>(O);

impl<M, B, O> Optimizer<M, B> for PanicsOnWorker1<O>
where
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    O: Optimizer<M, B>,
{
    type Record = O::Record;

    fn step(&mut self, lr: LearningRate, module: M, grads: GradientsParams) -> M {
        if on_worker(1) {
            panic!("the optimizer fails on purpose");
        }
        self.0.step(lr, module, grads)
    }

    fn step_multi(&mut self, lr: LearningRate, module: M, grads: MultiGradientsParams) -> M {
        self.0.step_multi(lr, module, grads)
    }

    fn to_record(&self) -> Self::Record {
        self.0.to_record()
    }

    fn load_record(self, record: Self::Record) -> Self {
        PanicsOnWorker1(self.0.load_record(record))
    }
}

#[test]
fn a_failure_after_the_exchange_poisons_and_drop_still_returns() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 2];
        let model = Mlp::<Plain>::new(&devices[0], false);
        let optimizer = PanicsOnWorker1(SgdConfig::new().init());
        let mut dp = DataParallel::new(devices.clone(), model.clone(), optimizer, LR).unwrap();
        let error = dp
            .step(shards::<Plain>(0, &devices), mse::<Plain>)
            .unwrap_err();
        assert!(
            matches!(&error, ParallelError::Panicked { worker: 1, message } if message.contains("on purpose")),
            "{error}"
        );
        assert!(dp.is_poisoned());
        assert!(matches!(
            dp.step(shards::<Plain>(1, &devices), mse::<Plain>),
            Err(ParallelError::Poisoned)
        ));
        assert!(matches!(dp.model(), Err(ParallelError::Poisoned)));
        drop(dp);
        // The threads ended and the collective is usable again.
        let mut dp =
            DataParallel::new(devices.clone(), model, SgdConfig::new().init(), LR).unwrap();
        dp.step(shards::<Plain>(0, &devices), mse::<Plain>)
            .expect("a fresh DataParallel steps");
    });
}

#[test]
fn one_data_parallel_per_backend_at_a_time_and_drop_frees_it() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 2];
        let model = Mlp::<Plain>::new(&devices[0], false);
        let mut first =
            DataParallel::new(devices.clone(), model.clone(), SgdConfig::new().init(), LR).unwrap();
        first
            .step(shards::<Plain>(0, &devices), mse::<Plain>)
            .unwrap();
        // `Checkpointed<Autodiff<NdArray>>` runs its collective on NdArray too.
        let second = DataParallel::new(
            devices.clone(),
            Mlp::<Ckpt>::new(&devices[0], true),
            SgdConfig::new().init(),
            LR,
        );
        assert!(
            matches!(second, Err(ParallelError::Busy { .. })),
            "{second:?}"
        );
        drop(first);
        // Had the workers not left the collective, registering peers 0 and 1 again would fail.
        let mut second = DataParallel::new(
            devices.clone(),
            Mlp::<Ckpt>::new(&devices[0], true),
            SgdConfig::new().init(),
            LR,
        )
        .unwrap();
        second
            .step(shards::<Ckpt>(0, &devices), mse::<Ckpt>)
            .unwrap();
    });
}

#[test]
fn bad_configurations_are_refused() {
    let _alone = common::alone();
    within(|| {
        let model = Mlp::<Plain>::new(&Default::default(), false);
        let none = DataParallel::new(Vec::new(), model.clone(), SgdConfig::new().init(), LR);
        assert!(matches!(none, Err(ParallelError::NoDevices)));
        let tree0 = DataParallel::with_config(
            vec![Default::default(); 2],
            model,
            SgdConfig::new().init(),
            LR,
            DataParallelConfig::new().with_strategy(AllReduceStrategy::Tree(0)),
        );
        assert!(matches!(tree0, Err(ParallelError::InvalidConfig(_))));
    });
}

#[test]
fn the_learning_rate_can_change_between_steps() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 2];
        let model = Mlp::<Plain>::new(&devices[0], false);
        let mut dp =
            DataParallel::new(devices.clone(), model, SgdConfig::new().init(), 0.0).unwrap();
        let before = replicas(&mut dp);
        dp.step(shards::<Plain>(0, &devices), mse::<Plain>).unwrap();
        assert_eq!(
            bits(&replicas(&mut dp)[0]),
            bits(&before[0]),
            "a zero rate moves nothing"
        );
        dp.set_learning_rate(LR);
        assert_eq!(dp.learning_rate(), LR);
        dp.step(shards::<Plain>(0, &devices), mse::<Plain>).unwrap();
        assert_ne!(bits(&replicas(&mut dp)[0]), bits(&before[0]));
    });
}

#[test]
fn a_snapshot_resumes_training_exactly() {
    let _alone = common::alone();
    within(|| {
        let devices = vec![Default::default(); 2];
        let adam = || AdamConfig::new().init::<Plain, Mlp<Plain>>();
        let model = Mlp::<Plain>::new(&devices[0], false);
        let mut dp = DataParallel::new(devices.clone(), model, adam(), LR).unwrap();
        for step in 0..2 {
            dp.step(shards::<Plain>(step, &devices), mse::<Plain>)
                .unwrap();
        }
        // The model and Adam's moments as they are after two steps.
        let (model, optimizer) = dp.snapshot().unwrap();
        let (same_model, _) = dp.snapshot().unwrap();
        for step in 2..4 {
            dp.step(shards::<Plain>(step, &devices), mse::<Plain>)
                .unwrap();
        }
        let uninterrupted = tensors(&dp.into_model().unwrap());

        let resume = |model: Mlp<Plain>, optimizer| {
            let mut dp = DataParallel::new(devices.clone(), model, optimizer, LR).unwrap();
            for step in 2..4 {
                dp.step(shards::<Plain>(step, &devices), mse::<Plain>)
                    .unwrap();
            }
            tensors(&dp.into_model().unwrap())
        };
        assert_eq!(bits(&resume(model, optimizer)), bits(&uninterrupted));
        // The moments matter: a fresh Adam from the same weights goes elsewhere.
        assert_ne!(bits(&resume(same_model, adam())), bits(&uninterrupted));
    });
}

#[test]
fn evaluate_runs_each_shard_on_its_worker_and_model_is_a_copy() {
    let _alone = common::alone();
    within(|| {
        type I = <Plain as AutodiffBackend>::InnerBackend;
        let devices = vec![Default::default(); 2];
        let model = Mlp::<Plain>::new(&devices[0], false);
        let mut dp =
            DataParallel::new(devices.clone(), model, SgdConfig::new().init(), LR).unwrap();
        dp.step(shards::<Plain>(0, &devices), mse::<Plain>).unwrap();
        let (x, _) = batch::<I>(1, &devices[0]);
        let parts = split_batch(x.clone(), &devices).unwrap();
        let outputs = dp
            .evaluate(parts, |model: &Mlp<I>, x: Tensor<I, 2>| {
                model.forward(x).into_data().to_vec::<f32>().unwrap()
            })
            .unwrap();
        let snapshot = dp.model().unwrap().valid();
        let whole = snapshot.forward(x).into_data().to_vec::<f32>().unwrap();
        assert_eq!(outputs.concat(), whole);
        // The copy is independent: training on goes on without it.
        dp.step(shards::<Plain>(1, &devices), mse::<Plain>).unwrap();
        assert_ne!(bits(&tensors(&snapshot)), bits(&replicas(&mut dp)[0]));
    });
}
