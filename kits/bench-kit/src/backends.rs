//! The backend matrix of the apps' tests, written once: [`backend_tests!`](crate::backend_tests)
//! makes one `#[test]` per backend from a test generic over the backend, as Burn's own
//! `testgen_*!` macros do.

/// One `#[test]` per backend listed, in a module of its own, each calling the generic test `$test`
/// with that backend (and the arguments given beside it):
///
/// - `ndarray`: `on_ndarray`, Burn's NdArray;
/// - `flex`: `on_flex`, burn-flex, where the calling crate's `flex` feature is on;
/// - `wgpu`: `on_wgpu_with_fusion`, Burn's fused wgpu (Mesa's lavapipe in CI), taking turns with
///   the other wgpu tests ([`wgpu::claim`](crate::wgpu::claim)) and skipped without an adapter;
/// - `wgpu_unfused`: `on_wgpu_without_fusion`, the same without fusion
///   ([`wgpu::Unfused`](crate::wgpu::Unfused));
/// - `cuda`: `on_cuda`, Burn's fused, autotuned CUDA, where the calling crate's `cuda` feature is
///   on (run by scripts/gpu-check on a CUDA machine).
///
/// ```ignore
/// fn every_cut_gives_the_plain_gradients<I: Backend>() { .. }
/// bench_kit::backend_tests!(
///     every_cut: every_cut_gives_the_plain_gradients,
///     [ndarray, wgpu, wgpu_unfused, cuda]
/// );
///
/// fn offload_matches<I: Backend>(issues_here: bool) { .. }
/// bench_kit::backend_tests!(
///     offload: offload_matches,
///     [ndarray(false), wgpu(true), wgpu_unfused(true)]
/// );
/// ```
///
/// (`ignore`: a `#[test]` item does not run inside a doctest; the apps' `tests/it/cuts.rs` and
/// `tests/same_run/offload.rs` use it.)
#[macro_export]
macro_rules! backend_tests {
    ($module:ident: $test:ident, [$($backend:ident $(($($arg:expr),*))?),+ $(,)?]) => {
        mod $module {
            $( $crate::backend_tests!(@one $backend, $test, ($($($arg),*)?)); )+
        }
    };
    (@one ndarray, $test:ident, ($($arg:expr),*)) => {
        #[test]
        fn on_ndarray() {
            super::$test::<::burn::backend::NdArray>($($arg),*);
        }
    };
    (@one flex, $test:ident, ($($arg:expr),*)) => {
        #[cfg(feature = "flex")]
        #[test]
        fn on_flex() {
            super::$test::<::burn::backend::Flex>($($arg),*);
        }
    };
    (@one wgpu, $test:ident, ($($arg:expr),*)) => {
        #[test]
        fn on_wgpu_with_fusion() {
            if let Some(_wgpu) = $crate::wgpu::claim() {
                super::$test::<::burn::backend::Wgpu>($($arg),*);
            }
        }
    };
    (@one wgpu_unfused, $test:ident, ($($arg:expr),*)) => {
        #[test]
        fn on_wgpu_without_fusion() {
            if let Some(_wgpu) = $crate::wgpu::claim() {
                super::$test::<$crate::wgpu::Unfused>($($arg),*);
            }
        }
    };
    (@one cuda, $test:ident, ($($arg:expr),*)) => {
        #[cfg(feature = "cuda")]
        #[test]
        fn on_cuda() {
            super::$test::<::burn::backend::Cuda>($($arg),*);
        }
    };
}
