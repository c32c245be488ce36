//! Module ops (convolutions, pools, linear, attention, ...).

use super::*;

forward_ops! {
    impl<I: Backend, C: CheckpointStrategy> ModuleOps<Self> for Checkpointed<Autodiff<I, C>> {
    #[region(embedding, Index)]
    fn embedding(weights: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
    fn embedding_backward(weights: FloatTensor<Self>, output_grad: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
    #[region(linear, Matmul)]
    fn linear(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>) -> FloatTensor<Self>;
    fn linear_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
    fn linear_weight_backward(x: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
    fn linear_bias_backward(output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(conv1d, Conv)]
    fn conv1d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvOptions<1>) -> FloatTensor<Self>;
    #[region(conv2d, Conv)]
    fn conv2d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvOptions<2>) -> FloatTensor<Self>;
    #[region(deform_conv2d, Conv)]
    fn deform_conv2d(x: FloatTensor<Self>, offset: FloatTensor<Self>, weight: FloatTensor<Self>, mask: Option<FloatTensor<Self>>, bias: Option<FloatTensor<Self>>, options: DeformConvOptions<2>) -> FloatTensor<Self>;
    #[by_hand(Plain, Other, "forwarded (a backward op: no graph node), its result struct converted")]
    fn deform_conv2d_backward(x: FloatTensor<Self>, offset: FloatTensor<Self>, weight: FloatTensor<Self>, mask: Option<FloatTensor<Self>>, bias: Option<FloatTensor<Self>>, output_grad: FloatTensor<Self>, options: DeformConvOptions<2>) -> DeformConv2dBackward<Self> {
        let out = <Autodiff<I, C> as ModuleOps<Autodiff<I, C>>>::deform_conv2d_backward(
            x, offset, weight, mask, bias, output_grad, options,
        );
        DeformConv2dBackward::new(
            out.x_grad,
            out.offset_grad,
            out.weight_grad,
            out.mask_grad,
            out.bias_grad,
        )
    }
    #[region(conv3d, Conv)]
    fn conv3d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvOptions<3>) -> FloatTensor<Self>;
    #[region(conv_transpose1d, Conv)]
    fn conv_transpose1d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvTransposeOptions<1>) -> FloatTensor<Self>;
    #[region(conv_transpose2d, Conv)]
    fn conv_transpose2d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvTransposeOptions<2>) -> FloatTensor<Self>;
    #[region(conv_transpose3d, Conv)]
    fn conv_transpose3d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvTransposeOptions<3>) -> FloatTensor<Self>;
    #[region(avg_pool1d, Pool)]
    fn avg_pool1d(x: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
    #[region(avg_pool2d, Pool)]
    fn avg_pool2d(x: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
    fn avg_pool2d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
    #[region(adaptive_avg_pool2d, Pool)]
    fn adaptive_avg_pool2d(x: FloatTensor<Self>, output_size: [usize; 2]) -> FloatTensor<Self>;
    fn adaptive_avg_pool2d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(adaptive_avg_pool1d, Pool)]
    fn adaptive_avg_pool1d(x: FloatTensor<Self>, output_size: usize) -> FloatTensor<Self>;
    #[region(max_pool1d, Pool)]
    fn max_pool1d(x: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, dilation: usize, ceil_mode: bool) -> FloatTensor<Self>;
    #[by_hand(Region, Pool, "region version; the indices go to the caller, the backward recomputes them")]
    fn max_pool1d_with_indices(x: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, dilation: usize, ceil_mode: bool) -> MaxPool1dWithIndices<Self> {
        // A region version returning Burn's struct: routed by the protocol, the struct built
        // around what it returns.
        let (output, indices) = crate::route::region_op_with::<I, _, _, _>(
            OP,
            crate::route::Float(x),
            (kernel_size, stride, padding, dilation, ceil_mode),
            |crate::route::Float(x), (kernel_size, stride, padding, dilation, ceil_mode)| {
                crate::recompute::max_pool1d_with_indices::<I>(x, kernel_size, stride, padding, dilation, ceil_mode)
            },
            |crate::route::Float(x), (kernel_size, stride, padding, dilation, ceil_mode)| {
                let out = <Autodiff<I, C> as ModuleOps<Autodiff<I, C>>>::max_pool1d_with_indices(
                    x, kernel_size, stride, padding, dilation, ceil_mode,
                );
                (out.output, out.indices)
            },
        );
        MaxPool1dWithIndices::new(output, indices)
    }
    #[by_hand(Plain, Other, "forwarded (a backward op: no graph node), its result struct converted")]
    fn max_pool1d_with_indices_backward(x: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, dilation: usize, ceil_mode: bool, output_grad: FloatTensor<Self>, indices: IntTensor<Self>) -> MaxPool1dBackward<Self> {
        let out = <Autodiff<I, C> as ModuleOps<Autodiff<I, C>>>::max_pool1d_with_indices_backward(
            x, kernel_size, stride, padding, dilation, ceil_mode, output_grad, indices,
        );
        MaxPool1dBackward::new(out.x_grad)
    }
    #[region(max_pool2d, Pool)]
    fn max_pool2d(x: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool) -> FloatTensor<Self>;
    #[by_hand(Region, Pool, "region version; the indices go to the caller, the backward recomputes them")]
    fn max_pool2d_with_indices(x: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool) -> MaxPool2dWithIndices<Self> {
        // A region version returning Burn's struct: routed by the protocol, the struct built
        // around what it returns.
        let (output, indices) = crate::route::region_op_with::<I, _, _, _>(
            OP,
            crate::route::Float(x),
            (kernel_size, stride, padding, dilation, ceil_mode),
            |crate::route::Float(x), (kernel_size, stride, padding, dilation, ceil_mode)| {
                crate::recompute::max_pool2d_with_indices::<I>(x, kernel_size, stride, padding, dilation, ceil_mode)
            },
            |crate::route::Float(x), (kernel_size, stride, padding, dilation, ceil_mode)| {
                let out = <Autodiff<I, C> as ModuleOps<Autodiff<I, C>>>::max_pool2d_with_indices(
                    x, kernel_size, stride, padding, dilation, ceil_mode,
                );
                (out.output, out.indices)
            },
        );
        MaxPool2dWithIndices::new(output, indices)
    }
    #[by_hand(Plain, Other, "forwarded (a backward op: no graph node), its result struct converted")]
    fn max_pool2d_with_indices_backward(x: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool, output_grad: FloatTensor<Self>, indices: IntTensor<Self>) -> MaxPool2dBackward<Self> {
        let out = <Autodiff<I, C> as ModuleOps<Autodiff<I, C>>>::max_pool2d_with_indices_backward(
            x, kernel_size, stride, padding, dilation, ceil_mode, output_grad, indices,
        );
        MaxPool2dBackward::new(out.x_grad)
    }
    #[region(interpolate, Other)]
    fn interpolate(x: FloatTensor<Self>, output_size: [usize; 2], options: InterpolateOptions) -> FloatTensor<Self>;
    fn interpolate_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>, output_size: [usize; 2], options: InterpolateOptions) -> FloatTensor<Self>;
    #[by_hand(Decomposed, Other, "decomposed through the decorator (Burn decomposes it through autodiff's ops)")]
    fn attention(query: FloatTensor<Self>, key: FloatTensor<Self>, value: FloatTensor<Self>, mask: Option<BoolTensor<Self>>, attn_bias: Option<FloatTensor<Self>>, options: AttentionModuleOptions) -> FloatTensor<Self> {
        // Autodiff decomposes attention through its own ops; decompose through the decorator's
        // instead, so that inside a region every step is routed like any other op.
        burn_backend::ops::attention::attention_fallback::<Self>(query, key, value, mask, attn_bias, options)
    }
    #[by_hand(Region, Other, "region version on a backend with a native CTC backward; elsewhere decomposed through the decorator into tensor ops, as Burn decomposes it, each recomputed")]
    fn ctc_loss(log_probs: FloatTensor<Self>, targets: IntTensor<Self>, input_lengths: IntTensor<Self>, target_lengths: IntTensor<Self>, blank: usize) -> FloatTensor<Self> {
        // Without a native CTC backward, Burn decomposes the loss into tensor ops through
        // autodiff's; decompose it through the decorator's, so that a region recomputes each.
        if !I::has_ctc_loss_backward() {
            return burn_backend::ops::ctc::ctc_loss_default::<Self>(log_probs, targets, input_lengths, target_lengths, blank);
        }
        crate::route::region_op::<I, _, _>(
            OP,
            crate::route::Float(log_probs),
            (targets, input_lengths, target_lengths, blank),
            |crate::route::Float(log_probs), (targets, input_lengths, target_lengths, blank)| {
                crate::recompute::ctc_loss::<I>(log_probs, targets, input_lengths, target_lengths, blank)
            },
            |crate::route::Float(log_probs), (targets, input_lengths, target_lengths, blank)| {
                <Autodiff<I, C> as ModuleOps<Autodiff<I, C>>>::ctc_loss(log_probs, targets, input_lengths, target_lengths, blank)
            },
        )
    }
    fn rfft(signal: FloatTensor<Self>, dim: usize, n: Option<usize>) -> (FloatTensor<Self>, FloatTensor<Self>);
    fn irfft(spectrum_re: FloatTensor<Self>, spectrum_im: FloatTensor<Self>, dim: usize, n: Option<usize>) -> FloatTensor<Self>;
    }
}
