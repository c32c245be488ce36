//! What a loss function may return: a loss, or a loss or an error.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use super::error::BoxError;

/// The result of a loss function given to [`DataParallel::step`](super::DataParallel::step):
/// either a `Tensor<B, 1>` holding one value, or a `Result` of one, whose error stops the step on
/// every worker and comes back as [`ParallelError::Failed`](super::ParallelError::Failed).
///
/// ```
/// use burn::prelude::*;
/// use burn_checkpoint_parallel::IntoLoss;
///
/// fn checked<B: Backend>(loss: Tensor<B, 1>) -> Result<Tensor<B, 1>, String> {
///     if loss.clone().into_scalar().elem::<f32>().is_finite() {
///         Ok(loss)
///     } else {
///         Err("the loss is not finite".into())
///     }
/// }
///
/// let device = Default::default();
/// let loss = Tensor::<burn::backend::NdArray, 1>::from_floats([f32::NAN], &device);
/// assert!(checked(loss).into_loss().is_err());
/// ```
pub trait IntoLoss<B: Backend> {
    /// The loss, or why there is none.
    fn into_loss(self) -> Result<Tensor<B, 1>, BoxError>;
}

impl<B: Backend> IntoLoss<B> for Tensor<B, 1> {
    fn into_loss(self) -> Result<Tensor<B, 1>, BoxError> {
        Ok(self)
    }
}

impl<B: Backend, E: Into<BoxError>> IntoLoss<B> for Result<Tensor<B, 1>, E> {
    fn into_loss(self) -> Result<Tensor<B, 1>, BoxError> {
        self.map_err(Into::into)
    }
}
