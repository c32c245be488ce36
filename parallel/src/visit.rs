//! Walks over a model's float tensors, in Burn's visiting order, to build a [`Layout`], read
//! gradients and buffers out of it, and put averaged ones back.
//!
//! Burn visits (and maps) a module's tensors in field order, the same for every replica of one
//! model, so the n-th tensor visited is the layout's n-th entry on every worker. The visitors
//! check the count so that a model whose structure changes shows up as an error.

use burn::module::{AutodiffModule, Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};

use super::bucket::{Entry, Kind, Layout};

/// `shape` as the fixed-size array a `reshape` to `D` dimensions takes.
fn dims<const D: usize>(shape: &[usize]) -> [usize; D] {
    assert_eq!(shape.len(), D, "a tensor changed rank between visits");
    std::array::from_fn(|i| shape[i])
}

/// The entries of an (autodiff) model: a tensor that requires a gradient is trainable, any other
/// float tensor (running statistics, frozen parameters) a buffer.
pub(crate) fn entries<B: AutodiffBackend, M: AutodiffModule<B>>(model: &M) -> Vec<Entry> {
    struct Collect(Vec<Entry>);
    impl<B: Backend> ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let tensor = param.val();
            self.0.push(Entry {
                id: param.id,
                shape: tensor.dims().to_vec(),
                dtype: tensor.dtype(),
                kind: if tensor.is_require_grad() {
                    Kind::Gradient
                } else {
                    Kind::Buffer
                },
            });
        }
    }
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}

/// The current value of every buffer of `inner` (a model's `valid()` copy, whose running
/// statistics Burn has merged), flattened; `None` for trainable entries.
pub(crate) fn buffers<I: Backend, MI: Module<I>>(
    layout: &Layout,
    inner: &MI,
) -> Vec<Option<Tensor<I, 1>>> {
    struct Read<'a, I: Backend> {
        layout: &'a Layout,
        values: Vec<Option<Tensor<I, 1>>>,
    }
    impl<I: Backend> ModuleVisitor<I> for Read<'_, I> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<I, D>>) {
            let entry = &self.layout.entries[self.values.len()];
            let value = (entry.kind == Kind::Buffer).then(|| param.val().reshape([entry.numel()]));
            self.values.push(value);
        }
    }
    let mut read = Read {
        layout,
        values: Vec::with_capacity(layout.entries.len()),
    };
    inner.visit(&mut read);
    assert_eq!(read.values.len(), layout.entries.len(), "the model changed");
    read.values
}

/// One flat tensor per entry, to be packed: a trainable entry's gradient (zeros where this
/// worker has none, e.g. a parameter its forward did not use), a buffer's change since `starts`.
/// Also says which trainable entries had a gradient here.
pub(crate) fn flatten<I: Backend, MI: Module<I>>(
    layout: &Layout,
    inner: &MI,
    grads: &mut GradientsParams,
    starts: &[Option<Tensor<I, 1>>],
    device: &I::Device,
) -> (Vec<Tensor<I, 1>>, Vec<bool>) {
    let now = buffers(layout, inner);
    let mut flat = Vec::with_capacity(layout.entries.len());
    let mut present = Vec::with_capacity(layout.entries.len());
    // The gradient container is keyed by id and typed by rank, so reading it needs the rank of
    // each tensor: a second visit provides it.
    struct Take<'a, I: Backend> {
        layout: &'a Layout,
        grads: &'a mut GradientsParams,
        taken: Vec<Option<Tensor<I, 1>>>,
    }
    impl<I: Backend> ModuleVisitor<I> for Take<'_, I> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<I, D>>) {
            let entry = &self.layout.entries[self.taken.len()];
            let grad = match entry.kind {
                Kind::Gradient => self
                    .grads
                    .remove::<I, D>(param.id)
                    .map(|g| g.reshape([entry.numel()])),
                Kind::Buffer => None,
            };
            self.taken.push(grad);
        }
    }
    let mut take = Take {
        layout,
        grads,
        taken: Vec::with_capacity(layout.entries.len()),
    };
    inner.visit(&mut take);
    assert_eq!(take.taken.len(), layout.entries.len(), "the model changed");
    for (((entry, grad), now), start) in layout.entries.iter().zip(take.taken).zip(now).zip(starts)
    {
        match entry.kind {
            Kind::Gradient => {
                present.push(grad.is_some());
                flat.push(
                    grad.unwrap_or_else(|| Tensor::zeros([entry.numel()], (device, entry.dtype))),
                );
            }
            Kind::Buffer => {
                present.push(false);
                let now = now.expect("a buffer's value");
                let start = start.clone().expect("a buffer's start");
                flat.push(now - start);
            }
        }
    }
    (flat, present)
}

/// The averaged gradients of the entries some worker had one for, shaped for the optimizer.
pub(crate) fn gradients<B: Backend, M: Module<B>, I: Backend>(
    layout: &Layout,
    model: &M,
    flat: &[Tensor<I, 1>],
    present: &[bool],
) -> GradientsParams {
    struct Register<'a, I: Backend> {
        layout: &'a Layout,
        flat: &'a [Tensor<I, 1>],
        present: &'a [bool],
        index: usize,
        grads: GradientsParams,
    }
    impl<B: Backend, I: Backend> ModuleVisitor<B> for Register<'_, I> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let i = self.index;
            self.index += 1;
            let entry = &self.layout.entries[i];
            if entry.kind == Kind::Gradient && self.present[i] {
                let grad = self.flat[i].clone().reshape(dims::<D>(&entry.shape));
                self.grads.register::<I, D>(param.id, grad);
            }
        }
    }
    let mut register = Register {
        layout,
        flat,
        present,
        index: 0,
        grads: GradientsParams::new(),
    };
    model.visit(&mut register);
    assert_eq!(register.index, layout.entries.len(), "the model changed");
    register.grads
}

/// Writes `values` (flat, `Some` for buffers) into the model's buffers.
pub(crate) fn write_buffers<B: AutodiffBackend, M: AutodiffModule<B>>(
    layout: &Layout,
    model: M,
    values: &[Option<Tensor<B::InnerBackend, 1>>],
) -> M {
    struct Write<'a, I: Backend> {
        layout: &'a Layout,
        values: &'a [Option<Tensor<I, 1>>],
        index: usize,
    }
    impl<B: AutodiffBackend> ModuleMapper<B> for Write<'_, B::InnerBackend> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let i = self.index;
            self.index += 1;
            let entry = &self.layout.entries[i];
            match (&self.values[i], entry.kind) {
                (Some(value), Kind::Buffer) => {
                    let (id, _, mapper) = param.consume();
                    let value = value.clone().reshape(dims::<D>(&entry.shape));
                    // A buffer is not tracked: the inner tensor goes in as a constant.
                    Param::from_mapped_value(id, Tensor::from_inner(value), mapper)
                }
                _ => param,
            }
        }
    }
    let mut write = Write {
        layout,
        values,
        index: 0,
    };
    let model = model.map(&mut write);
    assert_eq!(write.index, layout.entries.len(), "the model changed");
    model
}
