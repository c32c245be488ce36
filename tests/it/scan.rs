//! `Region::scan` against the loop written out on plain autodiff: the loss and every gradient
//! bit for bit, under every schedule, with burn-nn's LSTM state as the carry and a cell of
//! several layers; and the regions each schedule makes.

use crate::common;

use burn::module::{Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, Lstm, LstmConfig, LstmState};
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn_checkpoint::planner::{Plan, Treatment};
use burn_checkpoint::{Region, Schedule, checkpoint_scan};
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

/// A recurrent cell as users write one: a shared input projection, a recurrent one, a norm.
#[derive(Module, Debug)]
struct Cell<B: Backend> {
    input: Linear<B>,
    recurrent: Linear<B>,
    norm: LayerNorm<B>,
}

impl<B: Backend> Cell<B> {
    /// The same weights on every backend: from the test's data, not the generator.
    fn new(device: &B::Device) -> Self {
        let linear = |shape: [usize; 2], seed| Linear {
            weight: Param::from_tensor(Tensor::from_data(data(shape, seed), device)),
            bias: None,
        };
        Cell {
            input: linear([6, 8], 11),
            recurrent: linear([8, 8], 12),
            norm: LayerNormConfig::new(8).init(device),
        }
    }

    fn step(&self, hidden: Tensor<B, 2>, x: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let hidden = self
            .norm
            .forward(self.input.forward(x) + self.recurrent.forward(hidden))
            .tanh();
        (hidden.clone().sin(), hidden)
    }

    fn grads(&self, grads: &B::Gradients) -> Vec<Vec<f32>>
    where
        B: AutodiffBackend,
    {
        let gradient = "a parameter's gradient";
        vec![
            values(self.input.weight.val().grad(grads).expect(gradient)),
            values(self.recurrent.weight.val().grad(grads).expect(gradient)),
            values(self.norm.gamma.val().grad(grads).expect(gradient)),
        ]
    }
}

/// The loss and the gradients of the sequence, the initial carry and the cell's parameters,
/// the steps run as a scan under `schedule` (or, with none, the loop written out).
fn run<B: AutodiffBackend>(schedule: Option<Schedule>) -> Vec<Vec<f32>> {
    let device = Default::default();
    let cell = Cell::<B>::new(&device);
    let xs = Tensor::<B, 3>::from_data(data([3, 17, 6], 1), &device).require_grad();
    let h0 = Tensor::<B, 2>::from_data(data([3, 8], 2), &device).require_grad();
    let (ys, last) = match schedule {
        Some(schedule) => Region::named("cell").schedule(schedule).scan(
            &cell,
            h0.clone(),
            xs.clone(),
            1,
            |cell, h, x: Tensor<B, 2>| cell.step(h, x),
        ),
        None => {
            let mut h = h0.clone();
            let mut ys = Vec::new();
            for t in 0..17 {
                let x = xs.clone().narrow(1, t, 1).squeeze_dim::<2>(1);
                let (y, next) = cell.step(h, x);
                ys.push(y);
                h = next;
            }
            (Tensor::stack(ys, 1), h)
        }
    };
    let loss = (ys * 0.5).sum() + last.powf_scalar(2.0).sum();
    let grads = loss.backward();
    let mut all = vec![
        values(loss),
        values(xs.grad(&grads).expect("the sequence's gradient")),
        values(h0.grad(&grads).expect("the initial carry's gradient")),
    ];
    all.extend(cell.grads(&grads));
    all
}

#[test]
fn a_scan_gives_the_loops_loss_and_gradients_bitwise_under_every_schedule() {
    let plain = run::<Plain>(None);
    for schedule in [
        Schedule::EveryStep,
        Schedule::Snapshots(0),
        Schedule::Snapshots(3),
        Schedule::Snapshots(4),
        Schedule::Snapshots(16),
        Schedule::Snapshots(1000),
        Schedule::Budget(0),
        Schedule::Budget(3 * 8 * 4 * 5),
        Schedule::Budget(u64::MAX),
    ] {
        let scan = run::<Ckpt>(Some(schedule));
        assert_eq!(plain.len(), scan.len());
        for (index, (a, b)) in plain.iter().zip(&scan).enumerate() {
            assert_values_bitwise(&format!("{schedule:?}, value {index}"), a, b);
        }
    }
    // A plan giving the scan's regions a schedule (`Treatment::Scan`: a Burn 0.22 scan's choice)
    // runs them as recomputed regions here: the same values.
    let plan = (0..17).fold(Plan::new(), |plan, index| {
        plan.with("cell", index, Treatment::Scan(Schedule::Snapshots(1)))
    });
    let planned = plan.run(|| run::<Ckpt>(Some(Schedule::EveryStep)));
    for (index, (a, b)) in plain.iter().zip(&planned).enumerate() {
        assert_values_bitwise(&format!("under a plan, value {index}"), a, b);
    }
    // The same call on plain autodiff is the loop.
    let unregioned = run::<Plain>(Some(Schedule::Snapshots(2)));
    for (index, (a, b)) in plain.iter().zip(&unregioned).enumerate() {
        assert_values_bitwise(&format!("plain autodiff, value {index}"), a, b);
    }
}

/// The regions a scan of `steps` steps opens under `schedule`: how many steps each runs.
fn regions(steps: usize, schedule: Schedule) -> Vec<usize> {
    type Probe = (Tensor<Ckpt, 1>, Vec<Tensor<Ckpt, 1>>);
    let device = Default::default();
    let xs = Tensor::<Ckpt, 2>::zeros([steps, 2], &device);
    // A carry of 8 bytes (a 2-element tensor) when the scan starts, and the instance of the
    // region each step ran in.
    let init: Probe = (Tensor::zeros([2], &device), Vec::new());
    let (_, (_, seen)) = Region::named("probe").schedule(schedule).scan(
        &(),
        init,
        xs,
        0,
        |_, (h, mut seen): Probe, x: Tensor<Ckpt, 1>| {
            let index = Region::current().expect("inside a region").index;
            seen.push(Tensor::from_data([index as f32], &x.device()));
            (x.clone(), (h + x, seen))
        },
    );
    let mut sizes: Vec<usize> = Vec::new();
    let mut previous = None;
    for index in seen.into_iter().map(|t| values(t)[0]) {
        if previous != Some(index) {
            sizes.push(0);
            previous = Some(index);
        }
        *sizes.last_mut().expect("a region") += 1;
    }
    sizes
}

#[test]
fn each_schedule_cuts_the_steps_into_its_regions() {
    assert_eq!(regions(5, Schedule::EveryStep), [1, 1, 1, 1, 1]);
    assert_eq!(regions(10, Schedule::Snapshots(2)), [4, 3, 3]);
    assert_eq!(regions(4, Schedule::Snapshots(0)), [4]);
    assert_eq!(regions(3, Schedule::Snapshots(9)), [1, 1, 1]);
    // 20 bytes hold 2 carries of 8.
    assert_eq!(regions(9, Schedule::Budget(20)), [3, 3, 3]);
    assert_eq!(regions(9, Schedule::Budget(7)), [9]);
}

#[test]
fn burn_nns_lstm_state_is_a_carry() {
    let device = Default::default();
    let lstm: Lstm<Ckpt> = LstmConfig::new(4, 5, true).init(&device);
    let run = |scan: bool| -> Vec<Vec<f32>> {
        let xs = Tensor::<Ckpt, 3>::from_data(data([2, 9, 4], 3), &device).require_grad();
        let state = LstmState::new(
            Tensor::from_data(data([2, 5], 4), &device),
            Tensor::from_data(data([2, 5], 5), &device),
        );
        let step = |lstm: &Lstm<Ckpt>, state, x: Tensor<Ckpt, 2>| {
            let (_, state): (_, LstmState<Ckpt, 2>) = lstm.forward(x.unsqueeze_dim(1), Some(state));
            (state.hidden.clone(), state)
        };
        let (hidden, last) = if scan {
            checkpoint_scan(&lstm, state, xs.clone(), 1, step)
        } else {
            let (mut state, mut ys) = (state, Vec::new());
            for t in 0..9 {
                let (y, next) = step(&lstm, state, xs.clone().narrow(1, t, 1).squeeze_dim(1));
                ys.push(y);
                state = next;
            }
            (Tensor::stack(ys, 1), state)
        };
        let loss = hidden.sum() + last.cell.sum();
        let grads = loss.clone().backward();
        let mut all = vec![values(loss), values(xs.grad(&grads).expect("a gradient"))];
        all.extend(
            lstm.clone()
                .into_record()
                .input_gate
                .input_transform
                .weight
                .val()
                .grad(&grads)
                .map(values),
        );
        all
    };
    let (written, scanned) = (run(false), run(true));
    assert_eq!(written.len(), 3);
    for (index, (a, b)) in written.iter().zip(&scanned).enumerate() {
        assert_values_bitwise(&format!("value {index}"), a, b);
    }
}

#[test]
fn a_vec_of_the_steps_inputs_is_a_sequence() {
    let run = |as_vec: bool| -> Vec<Vec<f32>> {
        let device = Default::default();
        let cell = Cell::<Ckpt>::new(&device);
        let xs: Vec<Tensor<Ckpt, 2>> = (0..7)
            .map(|t| Tensor::from_data(data([3, 6], 20 + t), &device).require_grad())
            .collect();
        let h0 = Tensor::<Ckpt, 2>::from_data(data([3, 8], 2), &device);
        let step = |cell: &Cell<Ckpt>, h, x: Tensor<Ckpt, 2>| cell.step(h, x);
        let region = Region::named("cell").schedule(Schedule::Snapshots(2));
        let (ys, last) = if as_vec {
            region.scan(&cell, h0, xs.clone(), 1, step)
        } else {
            region.scan(&cell, h0, Tensor::stack::<3>(xs.clone(), 1), 1, step)
        };
        let loss = ys.sum() + last.sum();
        let grads = loss.clone().backward();
        let mut all = vec![values(loss)];
        all.extend(
            xs.iter()
                .map(|x| values(x.grad(&grads).expect("a gradient"))),
        );
        all.extend(cell.grads(&grads));
        all
    };
    let (stacked, listed) = (run(false), run(true));
    for (index, (a, b)) in stacked.iter().zip(&listed).enumerate() {
        assert_values_bitwise(&format!("value {index}"), a, b);
    }
}
