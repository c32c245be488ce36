//! [`OpKind::Conv`](crate::OpKind::Conv): convolutions of every dimension, their transposes,
//! deformable convolution.

mod convolution;
mod deform;

pub(crate) use convolution::{
    conv_transpose1d, conv_transpose2d, conv_transpose3d, conv1d, conv2d, conv3d,
};
pub(crate) use deform::deform_conv2d;
