//! Quantized tensor ops: no autodiff graph, forwarded as they are.

use super::*;

forward_ops! {
    impl<I: Backend, C: CheckpointStrategy> QTensorOps<Self> for Checkpointed<Autodiff<I, C>> {
    fn q_from_data(data: TensorData, device: &Device<Self>) -> QuantizedTensor<Self>;
    #[by_hand(Plain, Other, "forwarded (no graph node), its parameters struct converted")]
    fn quantize(tensor: FloatTensor<Self>, scheme: &QuantScheme, qparams: QuantizationParametersPrimitive<Self>) -> QuantizedTensor<Self> {
        <Autodiff<I, C> as QTensorOps<Autodiff<I, C>>>::quantize(
            tensor,
            scheme,
            QuantizationParametersPrimitive {
                scales: qparams.scales,
            },
        )
    }
    fn quantize_dynamic(tensor: FloatTensor<Self>, scheme: &QuantScheme) -> QuantizedTensor<Self>;
    fn dequantize(tensor: QuantizedTensor<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    fn q_device(tensor: &QuantizedTensor<Self>) -> Device<Self>;
    fn q_to_device(tensor: QuantizedTensor<Self>, device: &Device<Self>) -> QuantizedTensor<Self>;
    fn q_reshape(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self>;
    #[by_hand(Plain, Other, "forwarded (reads data: no graph node), counted in Counters::device_reads")]
    fn q_into_data(tensor: QuantizedTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        crate::counters::note_device_read();
        <Autodiff<I, C> as QTensorOps<Autodiff<I, C>>>::q_into_data(tensor)
    }
    fn q_expand(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self>;
    fn q_swap_dims(tensor: QuantizedTensor<Self>, dim1: usize, dim2: usize) -> QuantizedTensor<Self>;
    fn q_permute(tensor: QuantizedTensor<Self>, axes: &[usize]) -> QuantizedTensor<Self>;
    fn q_flip(tensor: QuantizedTensor<Self>, axes: &[usize]) -> QuantizedTensor<Self>;
    fn q_select(tensor: QuantizedTensor<Self>, dim: usize, indices: IntTensor<Self>) -> QuantizedTensor<Self>;
    fn q_slice(tensor: QuantizedTensor<Self>, slices: &[Slice]) -> QuantizedTensor<Self>;
    fn q_gather(dim: usize, tensor: QuantizedTensor<Self>, indices: IntTensor<Self>) -> QuantizedTensor<Self>;
    fn q_argmax(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
    fn q_argmin(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
    }
}
