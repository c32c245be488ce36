//! DenseNet-BC-100 under `DataParallel`: how many all-reduce calls a step makes.

use burn::backend::{Autodiff, NdArray};
use burn::optim::SgdConfig;
use burn_checkpoint_parallel::{DataParallel, DataParallelConfig};
use densenet_bc::{Cut, DenseNetConfig};

type B = burn_checkpoint::Checkpointed<Autodiff<NdArray>>;

#[test]
fn densenet_bc_100_exchanges_its_gradients_in_one_call() {
    let devices = vec![Default::default(); 2];
    let config = DenseNetConfig::new(100).with_cut(Cut::Layer);
    let make = |bucket_bytes| {
        DataParallel::with_config(
            devices.clone(),
            config.init::<B>(&devices[0]),
            SgdConfig::new().init(),
            0.1,
            DataParallelConfig::new().with_bucket_bytes(bucket_bytes),
        )
        .expect("workers start")
    };
    // One call per tensor: every weight, BatchNorm scale and shift, and running statistic.
    let unbucketed = make(0).all_reduce_calls_per_step();
    assert!(unbucketed > 300, "{unbucketed} tensors");
    // About 0.8 M parameters, 3 MiB: one 25 MiB bucket (the target is at most 5).
    assert_eq!(
        make(burn_checkpoint_parallel::DEFAULT_BUCKET_BYTES).all_reduce_calls_per_step(),
        1
    );
}
