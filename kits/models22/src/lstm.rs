//! A recurrent model as Burn's `examples/modern-lstm` writes it: a layer-normalised LSTM cell,
//! stacked layers, both directions, dropout between layers, a linear head on the last step. With
//! regions, each cell call is one: the state passes from one region to the next and every region
//! of a layer shares its cell's weights.

use burn::module::Module;
use burn::nn::{
    Dropout, DropoutConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig, LstmState, Sigmoid,
    Tanh,
};
use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::{Region, Schedule};

use crate::Cut;

/// One LSTM step with layer normalisation (modern-lstm's `LstmCell`).
#[derive(Module, Debug)]
pub struct LstmCell {
    /// The gates' input transform, `[i, f, g, o]` stacked.
    pub weight_ih: Linear,
    /// The gates' hidden-state transform.
    pub weight_hh: Linear,
    /// Normalises the gates' input part.
    pub norm_x: LayerNorm,
    /// Normalises the hidden state.
    pub norm_h: LayerNorm,
    /// Normalises the cell state.
    pub norm_c: LayerNorm,
    /// On the hidden state (probability 0 on the last layer).
    pub dropout: Dropout,
}

impl LstmCell {
    fn new(input: usize, hidden: usize, dropout: f64, device: &Device) -> Self {
        Self {
            weight_ih: LinearConfig::new(input, 4 * hidden).init(device),
            weight_hh: LinearConfig::new(hidden, 4 * hidden).init(device),
            norm_x: LayerNormConfig::new(4 * hidden).init(device),
            norm_h: LayerNormConfig::new(hidden).init(device),
            norm_c: LayerNormConfig::new(hidden).init(device),
            dropout: DropoutConfig::new(dropout).init(),
        }
    }

    /// One step: `x` `[batch, input]`, the state's hidden and cell `[batch, hidden]` each; the
    /// new state (burn-nn's `LstmState`, which crosses a region as its two tensors).
    pub fn forward(&self, x: Tensor<2>, state: LstmState<2>) -> LstmState<2> {
        let (h_prev, c_prev) = (state.hidden, state.cell);
        let gates = self.norm_x.forward(self.weight_ih.forward(x)) + self.weight_hh.forward(h_prev);
        let gates = gates.chunk(4, 1);
        let i = Sigmoid::new().forward(gates[0].clone());
        let f = Sigmoid::new().forward(gates[1].clone());
        let g = Tanh::new().forward(gates[2].clone());
        let o = Sigmoid::new().forward(gates[3].clone());
        let c = self.norm_c.forward(f * c_prev + i * g);
        let h = self.norm_h.forward(o * Tanh::new().forward(c.clone()));
        LstmState::new(c, self.dropout.forward(h))
    }
}

/// Stacked cells over a sequence.
#[derive(Module, Debug)]
pub struct StackedLstm {
    /// One cell per layer.
    pub layers: Vec<LstmCell>,
}

impl StackedLstm {
    fn new(input: usize, hidden: usize, layers: usize, dropout: f64, device: &Device) -> Self {
        Self {
            layers: (0..layers)
                .map(|layer| {
                    let input = if layer == 0 { input } else { hidden };
                    // No dropout on the last layer.
                    let dropout = if layer + 1 < layers { dropout } else { 0.0 };
                    LstmCell::new(input, hidden, dropout, device)
                })
                .collect(),
        }
    }

    /// `x` `[batch, seq, input]` to the last layer's hidden states `[batch, seq, hidden]`; with
    /// `cut` other than [`Cut::None`], each cell call is a region named `lstm.cell`.
    pub fn forward(&self, x: Tensor<3>, cut: Cut) -> Tensor<3> {
        let [batch, seq, _] = x.dims();
        let mut states = self.initial_states(&x);
        let cell = Region::named("lstm.cell");
        let mut outputs = Vec::with_capacity(seq);
        for t in 0..seq {
            let input = x.clone().slice([0..batch, t..t + 1]).squeeze_dim::<2>(1);
            let previous = std::mem::take(&mut states);
            let output;
            (output, states) = self.step(input, previous, |layer, input, previous| match cut {
                Cut::None => layer.forward(input, previous),
                _ => cell.run(layer, (input, previous), |layer, (input, state)| {
                    layer.forward(input, state)
                }),
            });
            outputs.push(output);
        }
        Tensor::stack(outputs, 1)
    }

    /// [`forward`](StackedLstm::forward) as one checkpointed scan over the sequence, named
    /// `lstm`, its carries kept as `schedule` says: the same values, one region node for every
    /// step and layer.
    pub fn forward_scan(&self, x: Tensor<3>, schedule: Schedule) -> Tensor<3> {
        let states = self.initial_states(&x);
        let (outputs, _) = Region::named("lstm").schedule(schedule).scan(
            self,
            states,
            x,
            1,
            |stack: &StackedLstm, states, input: Tensor<2>| {
                stack.step(input, states, |layer, input, previous| {
                    layer.forward(input, previous)
                })
            },
        );
        outputs
    }

    /// Every layer's state before the first step of `x`'s sequences.
    fn initial_states(&self, x: &Tensor<3>) -> Vec<LstmState<2>> {
        let [batch, _, _] = x.dims();
        let hidden = self.layers[0].norm_h.gamma.lazy_shape()[0];
        self.layers
            .iter()
            .map(|_| LstmState::initial([batch, hidden], &x.device()))
            .collect()
    }

    /// One time step through every layer, each cell call through `cell`: the last layer's
    /// hidden state and every layer's new state.
    fn step(
        &self,
        mut input: Tensor<2>,
        previous: Vec<LstmState<2>>,
        cell: impl Fn(&LstmCell, Tensor<2>, LstmState<2>) -> LstmState<2>,
    ) -> (Tensor<2>, Vec<LstmState<2>>) {
        let mut states = Vec::with_capacity(previous.len());
        for (layer, previous) in self.layers.iter().zip(previous) {
            let state = cell(layer, input, previous);
            input = state.hidden.clone();
            states.push(state);
        }
        (input, states)
    }
}

/// modern-lstm's `LstmNetwork`: stacked LSTMs in both directions (or one), their outputs
/// concatenated, a dropout, a linear head on the last step.
#[derive(Module, Debug)]
pub struct LstmNetwork {
    /// Left to right.
    pub forward: StackedLstm,
    /// Right to left, if bidirectional.
    pub reverse: Option<StackedLstm>,
    /// Before the head.
    pub dropout: Dropout,
    /// The head.
    pub head: Linear,
}

impl LstmNetwork {
    /// `layers` layers of `hidden` units over `input` features, in both directions if
    /// `bidirectional`, `dropout` between layers and before the head, `output` values out.
    pub fn new(
        input: usize,
        hidden: usize,
        layers: usize,
        bidirectional: bool,
        dropout: f64,
        output: usize,
        device: &Device,
    ) -> Self {
        let stack = || StackedLstm::new(input, hidden, layers, dropout, device);
        let directions = if bidirectional { 2 } else { 1 };
        Self {
            forward: stack(),
            reverse: bidirectional.then(stack),
            dropout: DropoutConfig::new(dropout).init(),
            head: LinearConfig::new(directions * hidden, output).init(device),
        }
    }

    /// `x` `[batch, seq, input]` to `[batch, output]`.
    pub fn forward(&self, x: Tensor<3>, cut: Cut) -> Tensor<2> {
        let [batch, seq, _] = x.dims();
        let mut output = self.forward.forward(x.clone(), cut);
        if let Some(reverse) = &self.reverse {
            let backwards = reverse.forward(x.flip([1]), cut).flip([1]);
            output = Tensor::cat(vec![output, backwards], 2);
        }
        self.head_on_last(output, batch, seq)
    }

    /// [`forward`](LstmNetwork::forward) with each direction one checkpointed scan (see
    /// [`StackedLstm::forward_scan`]).
    pub fn forward_scan(&self, x: Tensor<3>, schedule: Schedule) -> Tensor<2> {
        let [batch, seq, _] = x.dims();
        let mut output = self.forward.forward_scan(x.clone(), schedule);
        if let Some(reverse) = &self.reverse {
            let backwards = reverse.forward_scan(x.flip([1]), schedule).flip([1]);
            output = Tensor::cat(vec![output, backwards], 2);
        }
        self.head_on_last(output, batch, seq)
    }

    /// The dropout and the head on the last step's outputs.
    fn head_on_last(&self, output: Tensor<3>, batch: usize, seq: usize) -> Tensor<2> {
        let output = self.dropout.forward(output);
        let width = output.dims()[2];
        let last = output
            .slice([0..batch, seq - 1..seq, 0..width])
            .squeeze_dim::<2>(1);
        self.head.forward(last)
    }

    /// A batch of `batch` random sequences of `seq` steps and `input` features.
    pub fn sequences(batch: usize, seq: usize, input: usize, device: &Device) -> Tensor<3> {
        Tensor::random([batch, seq, input], Distribution::Default, device)
    }
}
