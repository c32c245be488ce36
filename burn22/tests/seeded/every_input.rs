//! Every tracked tensor a region is given gets what plain autodiff gives it, whatever the body
//! does with it — ignores it, lets it reach only an output the loss does not use, takes it as an
//! `Option` it does not use on this path — and never a panic (Burn panics "Can't consume the
//! gradients before they are registered at least once" when a node leaves a computed parent
//! without a gradient). One test per shape; `region_shapes.rs` mixes them at random.
//!
//! The one difference Burn's rule forces: a *computed* input (not a leaf) the region leaves
//! without a gradient must still get one, and gets zeros, so what it was computed from gets a zero
//! gradient where plain autodiff gives none — unless that comes from another region, whose node
//! reads the stand-in as "no gradient" and gives none, as plain autodiff does.

use crate::common;

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Distribution, Gradients, Tensor, TensorData};
use burn_checkpoint_22::{Region, checkpoint, checkpoint_fn};
use common::{device, grad_of, initialised, param_grads};

/// Two layers; a body may use either or both.
#[derive(Module, Debug)]
struct Pair {
    a: Linear,
    b: Linear,
}

fn pair() -> Pair {
    let device = device();
    device.seed(17);
    initialised(Pair {
        a: LinearConfig::new(6, 6).init(&device),
        b: LinearConfig::new(6, 6).init(&device),
    })
}

fn leaf(seed: u64) -> Tensor<2> {
    let device = device();
    device.seed(seed);
    Tensor::random([3, 6], Distribution::Default, &device).require_grad()
}

fn all_zero(data: &TensorData) -> bool {
    data.iter::<f32>().all(|v| v == 0.0)
}

#[test]
fn an_ignored_leaf_gets_no_gradient_as_in_plain_autodiff() {
    let _generator = common::generator();
    let net = pair();
    let (x, y) = (leaf(1), leaf(2));
    let step = |regions: bool| {
        let out = if regions {
            checkpoint(&net, (x.clone(), y.clone()), |net, (_x, y)| {
                net.a.forward(y)
            })
        } else {
            net.a.forward(y.clone())
        };
        out.tanh().sum().backward()
    };
    let (plain, region) = (step(false), step(true));
    assert_eq!(grad_of(&x, &region), None);
    assert_eq!(grad_of(&x, &plain), None);
    assert_eq!(grad_of(&y, &region), grad_of(&y, &plain));
    assert_eq!(param_grads(&net, &region), param_grads(&net, &plain));
}

/// Zeros where plain autodiff has none: what Burn's rule forces, pinned.
#[test]
fn an_ignored_computed_input_gets_zeros_instead_of_a_panic() {
    let _generator = common::generator();
    let net = pair();
    let (w, y) = (leaf(3), leaf(4));
    let step = |regions: bool| {
        let x = w.clone().mul_scalar(2.0).exp(); // computed: a node Burn must give a gradient
        let out = if regions {
            checkpoint(&net, (x, y.clone()), |net, (_x, y)| net.a.forward(y))
        } else {
            net.a.forward(y.clone())
        };
        out.tanh().sum().backward()
    };
    let (plain, region) = (step(false), step(true));
    assert_eq!(grad_of(&w, &plain), None);
    let zeros = grad_of(&w, &region).expect("zeros: Burn's rule");
    assert!(all_zero(&zeros), "{zeros:?}");
    assert_eq!(grad_of(&y, &region), grad_of(&y, &plain));
    assert_eq!(param_grads(&net, &region), param_grads(&net, &plain));
}

/// Where the ignored computed input reaches the loss another way, its gradient is plain's.
#[test]
fn an_ignored_computed_input_used_elsewhere_keeps_the_gradient_of_plain_autodiff() {
    let _generator = common::generator();
    let net = pair();
    let (w, y) = (leaf(5), leaf(6));
    let step = |regions: bool| {
        let x = w.clone().mul_scalar(2.0).exp();
        let out = if regions {
            checkpoint(&net, (x.clone(), y.clone()), |net, (_x, y)| {
                net.a.forward(y)
            })
        } else {
            net.a.forward(y.clone())
        };
        (out.tanh().sum() + x.sin().sum()).backward()
    };
    let (plain, region) = (step(false), step(true));
    assert!(grad_of(&w, &plain).is_some());
    assert_eq!(grad_of(&w, &region), grad_of(&w, &plain));
    assert_eq!(param_grads(&net, &region), param_grads(&net, &plain));
}

#[test]
fn an_input_reaching_only_an_unused_output_gets_what_plain_autodiff_gives() {
    let _generator = common::generator();
    let net = pair();
    let (x, w, y) = (leaf(7), leaf(8), leaf(9));
    let step = |regions: bool| {
        let computed = w.clone().mul_scalar(0.5);
        let body = |net: &Pair, (x, computed, y): (Tensor<2>, Tensor<2>, Tensor<2>)| {
            // Output 1 depends on x and `computed` only; the loss uses output 0.
            (net.a.forward(y), net.b.forward(x + computed))
        };
        let (used, _unused) = if regions {
            checkpoint(&net, (x.clone(), computed, y.clone()), body)
        } else {
            body(&net, (x.clone(), computed, y.clone()))
        };
        used.tanh().sum().backward()
    };
    let (plain, region) = (step(false), step(true));
    assert_eq!(grad_of(&x, &plain), None);
    assert_eq!(
        grad_of(&x, &region),
        None,
        "a leaf: none, as in plain autodiff"
    );
    assert_eq!(grad_of(&w, &plain), None);
    assert!(
        grad_of(&w, &region).is_some_and(|g| all_zero(&g)),
        "behind a computed input: zeros (Burn's rule)"
    );
    assert_eq!(grad_of(&y, &region), grad_of(&y, &plain));
    // `b` reaches only the unused output: no gradient, as in plain autodiff.
    assert_eq!(param_grads(&net, &region), param_grads(&net, &plain));
    assert_eq!(param_grads(&net.b, &region), vec![None, None]);
}

/// An optional bias, given but unused on this path of the body (a flag the body reads).
#[test]
fn an_optional_input_given_but_unused_on_this_path() {
    let _generator = common::generator();
    let net = pair();
    let (x, bias_source) = (leaf(10), leaf(11));
    for use_bias in [false, true] {
        let step = |regions: bool| {
            let bias = Some(net.b.forward(bias_source.clone())); // computed from `b`
            let body = move |net: &Pair, (x, bias): (Tensor<2>, Option<Tensor<2>>)| {
                let h = net.a.forward(x);
                match bias {
                    Some(bias) if use_bias => h + bias,
                    _ => h,
                }
            };
            let out = if regions {
                checkpoint(&net, (x.clone(), bias), body)
            } else {
                body(&net, (x.clone(), bias))
            };
            out.tanh().sum().backward()
        };
        let (plain, region) = (step(false), step(true));
        assert_eq!(grad_of(&x, &region), grad_of(&x, &plain), "{use_bias}");
        assert_eq!(
            param_grads(&net.a, &region),
            param_grads(&net.a, &plain),
            "{use_bias}"
        );
        if use_bias {
            assert_eq!(param_grads(&net.b, &region), param_grads(&net.b, &plain));
            assert_eq!(
                grad_of(&bias_source, &region),
                grad_of(&bias_source, &plain)
            );
        } else {
            // The bias is computed by `b`: zeros reach `b` and its input (Burn's rule).
            assert_eq!(param_grads(&net.b, &plain), vec![None, None]);
            for grad in param_grads(&net.b, &region) {
                assert!(grad.is_some_and(|g| all_zero(&g)));
            }
        }
    }
}

/// Region B ignores region A's second output, and region C ignores A's first: A's node reads the
/// stand-ins as "no gradient", so A's parameters get exactly plain autodiff's gradients, and a
/// region whose every output is ignored gives its parameters none, as plain autodiff.
#[test]
fn a_region_ignoring_another_regions_output_leaves_it_as_plain_autodiff_does() {
    let _generator = common::generator();
    let net = pair();
    let other = initialised(LinearConfig::new(6, 6).init(&device()));
    let (x, y) = (leaf(12), leaf(13));
    let a_body = |net: &Pair, x: Tensor<2>| (net.a.forward(x.clone()).tanh(), net.b.forward(x));
    let step = |regions: bool| -> Gradients {
        if regions {
            let (first, second) = Region::named("A").run(&net, x.clone(), a_body);
            let out = Region::named("B").run(&other, (first, second), |other, (first, _)| {
                other.forward(first)
            });
            out.sum().backward()
        } else {
            let (first, _second) = a_body(&net, x.clone());
            other.forward(first).sum().backward()
        }
    };
    let (plain, region) = (step(false), step(true));
    assert_eq!(param_grads(&net, &region), param_grads(&net, &plain));
    assert_eq!(param_grads(&net.b, &region), vec![None, None]);
    assert_eq!(grad_of(&x, &region), grad_of(&x, &plain));

    // A region over a single-output region's output, ignoring it.
    let step = |regions: bool| -> Gradients {
        if regions {
            let a = checkpoint(&net.a, x.clone(), |a, x| a.forward(x));
            checkpoint_fn((a, y.clone()), |(_a, y)| y.exp())
                .sum()
                .backward()
        } else {
            y.clone().exp().sum().backward()
        }
    };
    let (plain, region) = (step(false), step(true));
    assert_eq!(param_grads(&net.a, &region), vec![None, None]);
    assert_eq!(param_grads(&net.a, &plain), vec![None, None]);
    assert_eq!(grad_of(&x, &region), None);
    assert_eq!(grad_of(&y, &region), grad_of(&y, &plain));
}

#[test]
fn a_nested_region_ignoring_an_input() {
    let _generator = common::generator();
    let net = pair();
    let (x, w) = (leaf(14), leaf(15));
    let step = |regions: bool| {
        let computed = w.clone().mul_scalar(3.0);
        let inner = |net: &Pair, (x, _computed): (Tensor<2>, Tensor<2>)| net.b.forward(x);
        let out = if regions {
            checkpoint(&net, (x.clone(), computed), move |net, (x, computed)| {
                let h = net.a.forward(x);
                checkpoint(net, (h, computed), inner)
            })
        } else {
            inner(&net, (net.a.forward(x.clone()), computed))
        };
        out.tanh().sum().backward()
    };
    let (plain, region) = (step(false), step(true));
    assert_eq!(grad_of(&x, &region), grad_of(&x, &plain));
    assert_eq!(param_grads(&net, &region), param_grads(&net, &plain));
    assert_eq!(grad_of(&w, &plain), None);
    assert!(grad_of(&w, &region).is_some_and(|g| all_zero(&g)));
}

/// Parameters the body skips are not the region's: no gradient, as in plain autodiff, and a lazy
/// one stays undrawn (plain autodiff never initialises it either).
#[test]
fn parameters_the_body_skips_get_no_gradient_and_stay_lazy() {
    let _generator = common::generator();
    let device = device();
    device.seed(19);
    let plain_net = Pair {
        a: LinearConfig::new(6, 6).init(&device),
        b: LinearConfig::new(6, 6).init(&device),
    };
    device.seed(19);
    let region_net = Pair {
        a: LinearConfig::new(6, 6).init(&device),
        b: LinearConfig::new(6, 6).init(&device),
    };
    let x = Tensor::<2>::ones([3, 6], &device);
    device.seed(23);
    let plain = plain_net.a.forward(x.clone()).tanh().sum().backward();
    device.seed(23);
    let region = checkpoint(&region_net, x, |net, x| net.a.forward(x))
        .tanh()
        .sum()
        .backward();
    assert!(!region_net.b.weight.is_initialized(), "b was never used");
    assert!(!plain_net.b.weight.is_initialized());
    assert_eq!(
        param_grads(&region_net.a, &region),
        param_grads(&plain_net.a, &plain)
    );
    assert_eq!(
        region_net.a.weight.val().into_data(),
        plain_net.a.weight.val().into_data(),
        "drawn at its first use, as without the region"
    );
}
