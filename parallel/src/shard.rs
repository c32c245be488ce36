//! Shards: what one worker gets of a batch, and splitting a batch into them.

use burn::tensor::backend::Backend;
use burn::tensor::{BasicOps, Tensor, TensorKind};

use super::ParallelError;

/// What one worker receives of a batch: tensors (or a tuple, `Vec` or struct of tensors).
///
/// [`DataParallel::step`](super::DataParallel::step) compares every shard's
/// [`shapes`](Shard::shapes) with shard 0's before any worker starts, and each worker moves its
/// shard to its own device with [`to_device`](Shard::to_device) (a no-op for a tensor already
/// there).
///
/// Implemented for tensors of any kind, tuples of up to four shards, `Vec`s of shards and `()`.
/// For a batch struct, list its tensors:
///
/// ```
/// use burn::prelude::*;
/// use burn_checkpoint_parallel::Shard;
///
/// struct Batch<B: Backend> {
///     images: Tensor<B, 4>,
///     labels: Tensor<B, 1, Int>,
/// }
///
/// impl<B: Backend> Shard<B> for Batch<B> {
///     fn shapes(&self) -> Vec<Vec<usize>> {
///         vec![self.images.dims().to_vec(), self.labels.dims().to_vec()]
///     }
///
///     fn to_device(self, device: &B::Device) -> Self {
///         Batch {
///             images: self.images.to_device(device),
///             labels: self.labels.to_device(device),
///         }
///     }
/// }
/// ```
pub trait Shard<B: Backend>: Send + 'static {
    /// The shape of every tensor in the shard, in a fixed order.
    fn shapes(&self) -> Vec<Vec<usize>>;

    /// The shard on `device`.
    fn to_device(self, device: &B::Device) -> Self;
}

impl<B: Backend, const D: usize, K> Shard<B> for Tensor<B, D, K>
where
    K: TensorKind<B> + BasicOps<B> + 'static,
{
    fn shapes(&self) -> Vec<Vec<usize>> {
        vec![self.dims().to_vec()]
    }

    fn to_device(self, device: &B::Device) -> Self {
        Tensor::to_device(self, device)
    }
}

/// No data: for [`evaluate`](super::DataParallel::evaluate) closures that only look at the model.
impl<B: Backend> Shard<B> for () {
    fn shapes(&self) -> Vec<Vec<usize>> {
        Vec::new()
    }

    fn to_device(self, _device: &B::Device) -> Self {}
}

impl<B: Backend, S: Shard<B>> Shard<B> for Vec<S> {
    fn shapes(&self) -> Vec<Vec<usize>> {
        self.iter().flat_map(Shard::shapes).collect()
    }

    fn to_device(self, device: &B::Device) -> Self {
        self.into_iter().map(|s| s.to_device(device)).collect()
    }
}

macro_rules! tuple_shard {
    ($($name:ident),+) => {
        impl<B: Backend, $($name: Shard<B>),+> Shard<B> for ($($name,)+) {
            fn shapes(&self) -> Vec<Vec<usize>> {
                #[allow(non_snake_case)]
                let ($($name,)+) = self;
                let mut shapes = Vec::new();
                $(shapes.extend($name.shapes());)+
                shapes
            }

            fn to_device(self, device: &B::Device) -> Self {
                #[allow(non_snake_case)]
                let ($($name,)+) = self;
                ($($name.to_device(device),)+)
            }
        }
    };
}

tuple_shard!(A);
tuple_shard!(A, C);
tuple_shard!(A, C, E);
tuple_shard!(A, C, E, F);

/// Splits `tensor` along dimension 0 into one equal part per device, part `i` moved to
/// `devices[i]`.
///
/// Parts must be equal: every worker averages its loss over its own shard, and the mean of the
/// workers' means is the mean over the batch only when the shards are the same size.
///
/// ```
/// use burn::backend::NdArray;
/// use burn::prelude::*;
/// use burn_checkpoint_parallel::{ParallelError, split_batch};
///
/// let devices = vec![Default::default(); 2];
/// let x = Tensor::<NdArray, 2>::ones([6, 3], &devices[0]);
/// let parts = split_batch(x.clone(), &devices)?;
/// assert_eq!(parts[1].dims(), [3, 3]);
/// assert!(matches!(
///     split_batch(x, &[Default::default(); 4]),
///     Err(ParallelError::Split { len: 6, parts: 4 })
/// ));
/// # Ok::<(), ParallelError>(())
/// ```
pub fn split_batch<B: Backend, const D: usize, K>(
    tensor: Tensor<B, D, K>,
    devices: &[B::Device],
) -> Result<Vec<Tensor<B, D, K>>, ParallelError>
where
    K: TensorKind<B> + BasicOps<B>,
{
    let parts = devices.len();
    if parts == 0 {
        return Err(ParallelError::NoDevices);
    }
    let len = tensor.dims()[0];
    if len == 0 || !len.is_multiple_of(parts) {
        return Err(ParallelError::Split { len, parts });
    }
    let size = len / parts;
    Ok(devices
        .iter()
        .enumerate()
        .map(|(i, device)| tensor.clone().narrow(0, i * size, size).to_device(device))
        .collect())
}
