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

pub mod budget;
pub mod classifier;
pub mod devices;
pub mod images;
pub mod mlp;
pub mod run;
pub mod save;
pub mod stop;
pub mod text;
pub mod trainer;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

/// Every float parameter of `model` (running statistics included), named by its path
/// (`model.blocks.0.0.norm1.running_mean`), in visiting order; reading initialises lazy ones.
pub fn parameters(model: &impl Module) -> Vec<(String, Vec<f32>)> {
    #[derive(Default)]
    struct Values {
        path: Vec<String>,
        values: Vec<(String, Vec<f32>)>,
    }
    impl ModuleVisitor for Values {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_string());
        }

        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }

        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let data = param.val().into_data().convert::<f32>();
            let values = data.try_to_vec::<f32>().expect("f32 values");
            self.values.push((self.path.join("."), values));
        }
    }
    let mut values = Values::default();
    model.visit(&mut values);
    values.values
}
