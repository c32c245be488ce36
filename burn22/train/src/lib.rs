//! Checkpoint regions in Burn 0.22's own training loop, burn-train's `Learner`: the trainer for
//! Burn 0.22 users (the `train22` binary, [`trainer`]: DenseNet-BC on Fashion-MNIST or CIFAR-10
//! with Burn's checkpointing and with regions, a table per method), and [`mlp`], the small model
//! the tests train under each of burn-train's strategies, with and without regions, bit for bit.
//!
//! ```
//! use burn::tensor::Device;
//! use burn_checkpoint_22_train::parameters;
//! use burn_checkpoint_22_train::mlp::Mlp;
//!
//! let model = Mlp::new(&Device::flex().autodiff(), true);
//! assert_eq!(parameters(&model).len(), 2 * 4 * 2 + 2); // weights and biases
//! ```

pub mod classifier;
pub mod images;
pub mod mlp;
pub mod trainer;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

/// Every float parameter of `model`, in visiting order (reading initialises lazy ones).
pub fn parameters(model: &impl Module) -> Vec<Vec<f32>> {
    struct Values(Vec<Vec<f32>>);
    impl ModuleVisitor for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let data = param.val().into_data().convert::<f32>();
            self.0.push(data.try_to_vec::<f32>().expect("f32 values"));
        }
    }
    let mut values = Values(Vec::new());
    model.visit(&mut values);
    values.0
}
