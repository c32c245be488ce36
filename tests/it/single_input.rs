//! Every public form of a region over exactly one tensor and no parameters, bitwise against
//! plain autodiff: 1-D and 2-D inputs, a leaf and a tensor computed from a parameter (the
//! shapes that gave the Burn 0.22 crate a wrong gradient, tried here too).

use crate::common;

use burn::nn::Gelu;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_checkpoint::counters::Counters;
use burn_checkpoint::{
    Decision, Layer, Policy, Region, Segments, checkpoint, checkpoint_sequential,
};
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

/// The body every form runs: element-wise, one input, nothing else.
fn body<B: AutodiffBackend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    x.clone().exp().sin() * x.tanh()
}

/// A form of region, given the body on the decorator's tensors.
type Form<const D: usize> = fn(Tensor<Ckpt, D>) -> Tensor<Ckpt, D>;

/// Runs `form` on a leaf and on a tensor computed from a leaf (`w * 2`), and compares the loss
/// and the leaf's gradient with plain autodiff's `body`, bit for bit.
fn compare<const D: usize>(name: &str, shape: [usize; D], form: Form<D>) {
    fn outcome<B: AutodiffBackend, const D: usize>(
        data: &TensorData,
        derived: bool,
        f: impl Fn(Tensor<B, D>) -> Tensor<B, D>,
    ) -> (Vec<f32>, Vec<usize>, Vec<f32>) {
        let leaf = Tensor::<B, D>::from_data(data.clone(), &Default::default()).require_grad();
        let input = if derived {
            leaf.clone() * 2.0
        } else {
            leaf.clone()
        };
        let loss = f(input).sum();
        let grads = loss.backward();
        let grad = leaf.grad(&grads).expect("the leaf has a gradient");
        (values(loss), grad.dims().to_vec(), values(grad))
    }

    let data = data(shape, 17);
    for derived in [false, true] {
        let (plain_loss, plain_dims, plain_grad) = outcome::<Plain, D>(&data, derived, body);
        Counters::reset();
        let (loss, dims, grad) = outcome::<Ckpt, D>(&data, derived, form);
        let what = format!("{name}, {D}-D, input derived: {derived}");
        // The form opened a region: backward recomputed its ops.
        assert!(
            Counters::now().total_recomputes() > 0,
            "{what}: nothing was recomputed"
        );
        assert_values_bitwise(&format!("{what}: loss"), &plain_loss, &loss);
        assert_eq!(dims, plain_dims, "{what}: gradient shape");
        assert_values_bitwise(&format!("{what}: gradient"), &plain_grad, &grad);
    }
}

/// Runs each form on 1-D and 2-D inputs.
macro_rules! forms {
    ($($name:ident: |$x:ident| $form:expr;)+) => {$(
        #[test]
        fn $name() {
            compare::<1>(stringify!($name), [7], |$x| $form);
            compare::<2>(stringify!($name), [3, 5], |$x| $form);
        }
    )+};
}

/// The attribute, on a module without parameters.
struct Activations;

impl Activations {
    #[burn_checkpoint::checkpoint]
    fn region<B: AutodiffBackend, const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        body(x)
    }

    #[burn_checkpoint::checkpoint(policy = Policy::SaveComputeBound, name = "activations")]
    fn region_with_arguments<B: AutodiffBackend, const D: usize>(
        &self,
        x: Tensor<B, D>,
    ) -> Tensor<B, D> {
        body(x)
    }

    #[burn_checkpoint::checkpoint(offload)]
    fn offloaded_region<B: AutodiffBackend, const D: usize>(
        &self,
        x: Tensor<B, D>,
    ) -> Tensor<B, D> {
        body(x)
    }
}

/// A free function as a region.
#[burn_checkpoint::checkpoint]
fn free_region<B: AutodiffBackend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    body(x)
}

/// Layers of a stack without parameters.
enum Layers {
    Body,
    Identity,
}

impl<B: AutodiffBackend, const D: usize> Layer<Tensor<B, D>> for Layers {
    fn forward(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        match self {
            Layers::Body => body(x),
            Layers::Identity => x,
        }
    }
}

forms! {
    the_function_form: |x| checkpoint(|| body(x));
    a_region_run: |x| Region::new().run(|| body(x));
    a_named_region: |x| Region::named("single").run(|| body(x));
    a_region_with_a_policy: |x| Region::new().policy(Policy::SaveComputeBound).run(|| body(x));
    an_offloaded_region: |x| Region::new().offloaded().run(|| body(x));
    a_region_with_a_custom_policy: |x| Region::new()
        .policy(Policy::custom(|op| if op.name() == "float_exp" { Decision::Offload } else { Decision::Recompute }))
        .run(|| body(x));
    a_region_guard: |x| { let _region = Region::new().enter(); body(x) };
    a_named_offloaded_guard_with_a_policy: |x| {
        let _region = Region::named("single").policy(Policy::SaveComputeBound).offloaded().enter();
        body(x)
    };
    one_region_value_run_twice: |x| {
        let region = Region::named("twice");
        region.run(|| region.run(|| body(x)))
    };
    the_attribute_on_a_method: |x| Activations.region(x);
    the_attribute_with_policy_and_name: |x| Activations.region_with_arguments(x);
    the_attribute_with_offload: |x| Activations.offloaded_region(x);
    the_attribute_on_a_function: |x| free_region(x);
    // The body, then the identity, in two segments: the first (the body) is a region, the
    // last never is.
    checkpoint_sequential_: |x| checkpoint_sequential(&[Layers::Body, Layers::Identity], Segments::Count(2), x);
    a_region_sequential_with_a_policy: |x| Region::named("stack")
        .policy(Policy::SaveComputeBound)
        .offloaded()
        .sequential(&[Layers::Body, Layers::Identity], Segments::Count(2), x);
    nested_regions: |x| checkpoint(|| checkpoint(|| body(x)));
}

/// A stack of three layers in three segments, two of them regions, against the layers run one
/// after the other on plain autodiff.
#[test]
fn checkpoint_sequential_over_a_stack_without_parameters() {
    fn stack<B: AutodiffBackend>(x: Tensor<B, 2>, regions: bool) -> Tensor<B, 2> {
        let layers = [Layers::Body, Layers::Body, Layers::Body];
        if regions {
            checkpoint_sequential(&layers, Segments::Count(3), x)
        } else {
            layers.iter().fold(x, |x, layer| Layer::forward(layer, x))
        }
    }
    fn gradient<B: AutodiffBackend>(input: &TensorData, regions: bool) -> Vec<f32> {
        let x = Tensor::<B, 2>::from_data(input.clone(), &Default::default()).require_grad();
        let grads = stack(x.clone(), regions).sum().backward();
        values(x.grad(&grads).expect("x has a gradient"))
    }
    let input = data([3, 4], 5);
    Counters::reset();
    let regions = gradient::<Ckpt>(&input, true);
    assert!(Counters::now().recomputes.values().sum::<u64>() > 0);
    assert_values_bitwise("gradient", &gradient::<Plain>(&input, false), &regions);
}

/// Burn's own parameterless layer in a region.
#[test]
fn a_parameterless_burn_layer() {
    let input = data([4, 6], 3);
    let plain = Tensor::<Plain, 2>::from_data(input.clone(), &Default::default()).require_grad();
    let ckpt = Tensor::<Ckpt, 2>::from_data(input, &Default::default()).require_grad();
    // Gelu's output is inside the region (exp's is what it gives): recomputed.
    let plain_grads = Gelu::new().forward(plain.clone()).exp().sum().backward();
    Counters::reset();
    let ckpt_grads = checkpoint(|| Gelu::new().forward(ckpt.clone()).exp())
        .sum()
        .backward();
    assert!(Counters::now().recomputes.values().sum::<u64>() > 0);
    assert_values_bitwise(
        "gelu gradient",
        &values(plain.grad(&plain_grads).unwrap()),
        &values(ckpt.grad(&ckpt_grads).unwrap()),
    );
}
