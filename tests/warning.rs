//! A region on a backend that is not `Checkpointed` changes nothing and says so once, naming the
//! backend. One test in this binary: the warning is once per process.

mod common;

use std::sync::Mutex;

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use common::{Plain, data, values};

static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        if record.level() == log::Level::Warn {
            MESSAGES.lock().unwrap().push(record.args().to_string());
        }
    }

    fn flush(&self) {}
}

#[burn_checkpoint::checkpoint]
fn double<B: Backend>(x: Tensor<B, 2>) -> Tensor<B, 2> {
    x.clone() + x
}

#[test]
fn a_region_on_another_backend_is_a_no_op_that_says_so_once() {
    log::set_logger(&Capture).unwrap();
    log::set_max_level(log::LevelFilter::Warn);

    let x = Tensor::<Plain, 2>::from_data(data([2, 3], 1), &Default::default());
    let expected = values(x.clone() + x.clone());
    for _ in 0..3 {
        assert_eq!(values(double(x.clone())), expected);
    }
    let messages = MESSAGES.lock().unwrap().clone();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].contains("Autodiff"), "{}", messages[0]);
    assert!(messages[0].contains("not `Checkpointed"), "{}", messages[0]);
}
