//! Regions on several threads at once (as data parallelism runs them).
//!
//! Regression test: burn-autodiff 0.21 frees, from any thread's backward, every graph none of
//! whose nodes is referenced by a tensor. A region op once dropped its operands' handles before
//! registering its own node, so another thread could free an operand's step in between, and a
//! later backward panicked in the checkpointer.

use crate::common;

use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn_checkpoint::checkpoint;
use common::Ckpt;

#[test]
fn four_threads_run_regions_at_once_without_a_panic() {
    let workers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let device = Default::default();
                let x = Tensor::<Ckpt, 2>::ones([4, 6], &device).require_grad();
                let w = Tensor::<Ckpt, 2>::ones([6, 6], &device).require_grad();
                for _ in 0..300 {
                    let loss = checkpoint(|| relu(x.clone()).matmul(w.clone()).sum());
                    let _ = loss.backward();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("a worker panicked");
    }
}
