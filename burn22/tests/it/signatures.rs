//! The signatures `#[checkpoint]` takes, as Burn models write them: a block that takes a shared
//! `&RotaryEncoding` (burn-nn's), a `&Config`, a `&[usize]`, an optional mask by reference, an
//! optional bias and a tensor by reference as inputs, an `Int` tensor captured by value; a
//! generic method; a tuple returned. Each is compared with the same body without the attribute,
//! bit for bit: outputs, the inputs' gradients and the parameters'.

use crate::common;

use burn::module::Module;
use burn::nn::{Linear, LinearConfig, RotaryEncoding, RotaryEncodingConfig};
use burn::tensor::activation::softmax;
use burn::tensor::{Bool, Device, Distribution, Int, Tensor, TensorData};
use burn_checkpoint_22::checkpoint;
use common::{device, grad_of, param_grads};

const HEADS: usize = 2;
const HEAD: usize = 4;
const SEQ: usize = 5;

/// What a model passes every block by reference.
#[derive(Clone, Debug)]
struct AttentionConfig {
    scale: f32,
}

#[derive(Module, Debug)]
struct Attention {
    qkv: Linear,
    out: Linear,
}

/// The body, shared by the plain method and the region: attention with rotary positions, an
/// optional mask and an optional bias.
#[allow(clippy::too_many_arguments)]
fn attend(
    attention: &Attention,
    x: Tensor<3>,
    rope: &RotaryEncoding,
    config: &AttentionConfig,
    heads: &[usize],
    mask: Option<&Tensor<4, Bool>>,
    bias: Option<Tensor<1>>,
    residual: &Tensor<3>,
) -> Tensor<3> {
    let [batch, seq, _] = x.dims();
    let split = |t: Tensor<3>| t.reshape([batch, seq, heads[0], HEAD]).swap_dims(1, 2);
    let qkv = attention.qkv.forward(x).chunk(3, 2);
    let (q, k, v) = (
        rope.forward(split(qkv[0].clone())),
        rope.forward(split(qkv[1].clone())),
        split(qkv[2].clone()),
    );
    let mut scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(config.scale);
    if let Some(mask) = mask {
        scores = scores.mask_fill(mask.clone(), -1e4);
    }
    let heads_out = softmax(scores, 3).matmul(v).swap_dims(1, 2);
    let mut out = attention
        .out
        .forward(heads_out.reshape([batch, seq, heads[0] * HEAD]));
    if let Some(bias) = bias {
        out = out + bias.unsqueeze::<3>();
    }
    out + residual.clone()
}

impl Attention {
    fn new(device: &Device) -> Self {
        let width = HEADS * HEAD;
        Self {
            qkv: LinearConfig::new(width, 3 * width).init(device),
            out: LinearConfig::new(width, width).init(device),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn plain(
        &self,
        x: Tensor<3>,
        rope: &RotaryEncoding,
        config: &AttentionConfig,
        heads: &[usize],
        mask: Option<&Tensor<4, Bool>>,
        bias: Option<Tensor<1>>,
        residual: &Tensor<3>,
    ) -> Tensor<3> {
        attend(self, x, rope, config, heads, mask, bias, residual)
    }

    /// References, an optional reference, an optional input and an input by reference.
    #[checkpoint]
    #[allow(clippy::too_many_arguments)]
    fn region(
        &self,
        x: Tensor<3>,
        rope: &RotaryEncoding,
        config: &AttentionConfig,
        heads: &[usize],
        mask: Option<&Tensor<4, Bool>>,
        bias: Option<Tensor<1>>,
        residual: &Tensor<3>,
    ) -> Tensor<3> {
        attend(self, x, rope, config, heads, mask, bias, residual)
    }

    /// A generic method, an `Int` tensor captured by value, a tuple returned.
    #[checkpoint(name = "gather")]
    fn gather<const D: usize>(&self, x: Tensor<D>, rows: Tensor<1, Int>) -> (Tensor<D>, Tensor<D>) {
        let picked = x.clone().select(0, rows).tanh();
        (picked.clone().exp(), picked * x.sum().unsqueeze())
    }
}

fn random<const D: usize>(shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::random(shape, Distribution::Default, device)
}

/// Loss, input gradients and parameter gradients of one run.
type Outcome = (TensorData, Vec<Option<TensorData>>, Vec<Option<TensorData>>);

#[test]
fn a_block_taking_references_options_and_a_shared_rope_gives_plain_gradients() {
    let device = device();
    device.seed(3);
    let attention = Attention::new(&device);
    let rope = RotaryEncodingConfig::new(SEQ, HEAD).init(&device);
    let config = AttentionConfig { scale: 0.5 };
    let heads = vec![HEADS];
    let mask = Tensor::<4, Int>::random([1, 1, SEQ, SEQ], Distribution::Uniform(0.0, 2.0), &device)
        .equal_elem(1)
        .expand([2, HEADS, SEQ, SEQ]);
    let x = random([2, SEQ, HEADS * HEAD], &device).require_grad();
    let bias = random([HEADS * HEAD], &device).require_grad();
    let residual = random([2, SEQ, HEADS * HEAD], &device).require_grad();

    for (with_mask, with_bias) in [(false, false), (true, false), (false, true), (true, true)] {
        let run = |regions: bool| -> Outcome {
            let mask = with_mask.then_some(&mask);
            let optional_bias = with_bias.then(|| bias.clone());
            let out = if regions {
                attention.region(
                    x.clone(),
                    &rope,
                    &config,
                    &heads,
                    mask,
                    optional_bias,
                    &residual,
                )
            } else {
                attention.plain(
                    x.clone(),
                    &rope,
                    &config,
                    &heads,
                    mask,
                    optional_bias,
                    &residual,
                )
            };
            let loss = out.powf_scalar(2.0).sum();
            let grads = loss.backward();
            let inputs = vec![
                grad_of(&x, &grads),
                grad_of(&bias, &grads),
                grad_of(&residual, &grads),
            ];
            (loss.into_data(), inputs, param_grads(&attention, &grads))
        };
        let (plain, region) = (run(false), run(true));
        let what = format!("mask {with_mask}, bias {with_bias}");
        assert_eq!(plain.0, region.0, "{what}: loss");
        assert_eq!(
            plain.1, region.1,
            "{what}: input gradients (x, bias, residual)"
        );
        assert_eq!(plain.2, region.2, "{what}: parameter gradients");
        assert_eq!(
            region.1[1].is_some(),
            with_bias,
            "{what}: the bias is an input"
        );
    }
}

#[test]
fn a_generic_method_with_an_int_capture_returns_a_tuple_with_plain_gradients() {
    let device = device();
    device.seed(4);
    let attention = Attention::new(&device);
    let x = random([4, 3], &device).require_grad();
    let rows = Tensor::<1, Int>::from_ints([2, 0, 2], &device);

    let plain = {
        let picked = x.clone().select(0, rows.clone()).tanh();
        (picked.clone().exp(), picked * x.clone().sum().unsqueeze())
    };
    let region = attention.gather(x.clone(), rows);
    let loss = |(a, b): (Tensor<2>, Tensor<2>)| (a * 2.0 + b).sum();
    let (plain_loss, region_loss) = (loss(plain), loss(region));
    let (plain_grads, region_grads) = (plain_loss.backward(), region_loss.backward());
    assert_eq!(plain_loss.into_data(), region_loss.into_data());
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &region_grads));
}

#[test]
#[should_panic(expected = "a checkpoint region used a tracked tensor it was not given")]
fn a_captured_tensor_that_requires_grad_is_refused_at_run_time() {
    let device = device();
    let x = random([2, SEQ, HEADS * HEAD], &device);
    // A float scale that requires grad, passed where the body takes an `Option<&Tensor<..>>`:
    // a capture, which would silently get no gradient.
    let tracked = random([2, SEQ, HEADS * HEAD], &device).require_grad();
    #[derive(Module, Debug)]
    struct Scale {
        linear: Linear,
    }
    impl Scale {
        #[checkpoint]
        fn forward(&self, x: Tensor<3>, by: Option<&Tensor<3>>) -> Tensor<3> {
            let x = self.linear.forward(x);
            match by {
                Some(by) => x * by.clone(),
                None => x,
            }
        }
    }
    let scale = Scale {
        linear: LinearConfig::new(HEADS * HEAD, HEADS * HEAD).init(&device),
    };
    let _ = scale.forward(x, Some(&tracked)).sum().backward();
}
