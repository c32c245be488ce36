//! Bucketing: which float tensors of the model go, flattened, into which all-reduce call.
//!
//! One all-reduce per parameter tensor is hundreds of small calls per step (DenseNet-BC-100 has
//! about 300 tensors), each paying burn-collective's fixed cost. As PyTorch DDP does, tensors are
//! flattened and concatenated, in the model's visiting order, into buckets of at most a given
//! size; a tensor larger than that gets a bucket of its own.

use std::ops::Range;

use burn::module::ParamId;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor};

/// What a float tensor of the model contributes to the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A trainable parameter: its gradient is averaged.
    Gradient,
    /// A tensor without gradient (BatchNorm running statistics, a frozen parameter): its change
    /// during the step is averaged, so replicas stay equal and an unchanged tensor stays exact.
    Buffer,
}

/// One float tensor of the model, in visiting order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub id: ParamId,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub kind: Kind,
}

impl Entry {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// One all-reduce call: consecutive entries of one dtype, then zero padding.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bucket {
    pub entries: Range<usize>,
    /// Elements of the entries.
    pub used: usize,
    /// Elements sent: `used` rounded up to a multiple of the worker count, at least one per
    /// worker. burn-collective 0.21's ring all-reduce slices a tensor into one equal part per
    /// peer and panics (inside its server) on lengths that do not divide evenly; padding keeps
    /// every strategy safe for a few bytes.
    pub len: usize,
    pub dtype: DType,
}

/// The model's float tensors and how they are cut into buckets; the same on every worker.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    pub entries: Vec<Entry>,
    pub buckets: Vec<Bucket>,
}

impl Layout {
    /// Plans buckets of at most `bucket_bytes` (one per entry when 0), padded to a multiple of
    /// `workers` elements.
    pub fn new(entries: Vec<Entry>, bucket_bytes: usize, workers: usize) -> Layout {
        let mut buckets: Vec<Bucket> = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let numel = entry.numel();
            match buckets.last_mut() {
                Some(last)
                    if last.dtype == entry.dtype
                        && (last.used + numel).saturating_mul(entry.dtype.size())
                            <= bucket_bytes =>
                {
                    last.entries.end = i + 1;
                    last.used += numel;
                }
                _ => buckets.push(Bucket {
                    entries: i..i + 1,
                    used: numel,
                    len: 0,
                    dtype: entry.dtype,
                }),
            }
        }
        let workers = workers.max(1);
        for bucket in &mut buckets {
            bucket.len = bucket.used.div_ceil(workers).max(1) * workers;
        }
        Layout { entries, buckets }
    }

    /// Whether any entry is a buffer (then running statistics must be synchronised).
    pub fn has_buffers(&self) -> bool {
        self.entries.iter().any(|e| e.kind == Kind::Buffer)
    }

    /// Bytes one worker sends per step.
    pub fn bytes(&self) -> usize {
        self.buckets.iter().map(|b| b.len * b.dtype.size()).sum()
    }

    /// Concatenates one flat tensor per entry into the buckets, padding with zeros.
    pub fn fill<I: Backend>(
        &self,
        flat: Vec<Tensor<I, 1>>,
        device: &I::Device,
    ) -> Vec<Tensor<I, 1>> {
        assert_eq!(flat.len(), self.entries.len(), "one flat tensor per entry");
        let mut flat = flat.into_iter();
        self.buckets
            .iter()
            .map(|bucket| {
                let mut parts: Vec<Tensor<I, 1>> =
                    flat.by_ref().take(bucket.entries.len()).collect();
                if bucket.len > bucket.used {
                    parts.push(Tensor::zeros(
                        [bucket.len - bucket.used],
                        (device, bucket.dtype),
                    ));
                }
                if parts.len() == 1 {
                    parts.pop().expect("one part")
                } else {
                    Tensor::cat(parts, 0)
                }
            })
            .collect()
    }

    /// Cuts reduced buckets back into one flat tensor per entry.
    pub fn split<I: Backend>(&self, buckets: Vec<Tensor<I, 1>>) -> Vec<Tensor<I, 1>> {
        assert_eq!(buckets.len(), self.buckets.len(), "one tensor per bucket");
        let mut flat = Vec::with_capacity(self.entries.len());
        for (bucket, tensor) in self.buckets.iter().zip(buckets) {
            let mut offset = 0;
            for entry in &self.entries[bucket.entries.clone()] {
                let numel = entry.numel();
                flat.push(tensor.clone().narrow(0, offset, numel));
                offset += numel;
            }
        }
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    fn entry(numel: usize) -> Entry {
        Entry {
            id: ParamId::new(),
            shape: vec![numel],
            dtype: DType::F32,
            kind: Kind::Gradient,
        }
    }

    #[test]
    fn buckets_fill_up_to_the_size_and_pad_to_the_worker_count() {
        // 4-byte floats: 10 + 10 fit in 80 bytes, the third starts a bucket, 30 is alone.
        let layout = Layout::new(vec![entry(10), entry(10), entry(5), entry(30)], 80, 4);
        let plan: Vec<_> = layout
            .buckets
            .iter()
            .map(|b| (b.entries.clone(), b.used, b.len))
            .collect();
        assert_eq!(plan, vec![(0..2, 20, 20), (2..3, 5, 8), (3..4, 30, 32)]);
        let unbucketed = Layout::new(vec![entry(10), entry(10)], 0, 2);
        assert_eq!(unbucketed.buckets.len(), 2);
        let empty = Layout::new(vec![entry(0)], 0, 3);
        assert_eq!(empty.buckets[0].len, 3, "at least one element per worker");
    }

    #[test]
    fn split_inverts_fill() {
        let device = Default::default();
        let layout = Layout::new(vec![entry(3), entry(2), entry(4)], 20, 2);
        let flat: Vec<Tensor<NdArray, 1>> = [3, 2, 4]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                Tensor::arange(0..n as i64, &device)
                    .float()
                    .add_scalar((10 * i) as f32)
            })
            .collect();
        let buckets = layout.fill(flat.clone(), &device);
        assert_eq!(
            buckets.iter().map(|b| b.dims()[0]).collect::<Vec<_>>(),
            [6, 4]
        );
        for (a, b) in layout.split(buckets).into_iter().zip(flat) {
            assert_eq!(a.into_data(), b.into_data());
        }
    }
}
