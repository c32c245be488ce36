//! Transactions (batched reads): forwarded.

use super::*;

forward_ops! {
    impl<I: Backend, C: CheckpointStrategy> TransactionOps<Self> for Checkpointed<Autodiff<I, C>> {
    #[by_hand(Plain, Other, "forwarded (reads data: no graph node), its transaction struct converted, counted in Counters::device_reads")]
    fn tr_execute(transaction: TransactionPrimitive<Self>) -> impl Future<Output = Result<TransactionPrimitiveData, ExecutionError>> + Send {
        crate::counters::note_device_read();
        <Autodiff<I, C> as TransactionOps<Autodiff<I, C>>>::tr_execute(TransactionPrimitive::new(
            transaction.read_floats,
            transaction.read_qfloats,
            transaction.read_ints,
            transaction.read_bools,
        ))
    }
    }
}
