//! How closely a step with regions must agree with the same step on plain autodiff, on one
//! backend: the gradient tests of both crates (`every_cut` of the apps, burn22's wgpu test)
//! compare through [`Agreement::check`].
//!
//! Regions change no arithmetic: a recomputed op runs the op forward ran, on the same values.
//! Whether the two programs also meet the same *kernels* is the backend's choice. NdArray, Flex
//! and a cubecl runtime without fusion pick an op's kernel by the op and its shapes (cubecl's
//! autotune keys), so both programs get the same sums in the same order: bit for bit. Burn's
//! fusion with autotune keys a fused matmul or reduction also by the ops fused around it
//! (burn-cubecl-fusion's `FusedMatmulAutotuneKey` counts them), and a recompute in backward is
//! fused with other neighbours than the same op in forward: the two programs tune separate keys,
//! each by timing its candidates, and candidates sum in different orders. Then the programs agree
//! within float reassociation, and bit for bit only when the timings happen to pick alike (CI
//! saw `Block, dropout 0` differ once on fused wgpu; an H200 saw it on fused CUDA).

/// How closely a step with regions must agree with plain autodiff's on one backend.
///
/// ```
/// use app_kit::agreement::Agreement;
///
/// assert_eq!(Agreement::for_backend("ndarray"), Agreement::Bitwise);
/// assert_eq!(Agreement::for_backend("cubecl<wgpu<wgsl>>"), Agreement::Bitwise);
/// let fused = Agreement::for_backend("fusion<cubecl<wgpu<wgsl>>>");
/// assert_eq!(fused, Agreement::Reassociation);
///
/// let plain = vec![vec![1.0, -2.0], vec![0.5]];
/// assert!(Agreement::Bitwise.check(&plain, &plain).is_ok());
/// let reassociated = vec![vec![1.0, -2.0 + 4e-7], vec![0.5]];
/// assert!(Agreement::Bitwise.check(&reassociated, &plain).is_err());
/// assert!(fused.check(&reassociated, &plain).is_ok());
/// let wrong = vec![vec![1.0, -2.01], vec![0.5]];
/// assert!(fused.check(&wrong, &plain).unwrap_err().contains("tensor 0"));
///
/// // A gradient that is zero in exact arithmetic is noise: measured against the others.
/// let noise = vec![vec![1.0, -2.0], vec![3e-10]];
/// assert!(fused.check(&noise, &[vec![1.0, -2.0], vec![-4e-10]]).is_ok());
/// assert!(fused.check(&noise, &[vec![1.0, -2.0], vec![1e-3]]).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agreement {
    /// Every value bit for bit (NaN's bits included): the backend picks kernels by op and shapes.
    Bitwise,
    /// Every value within [`REASSOCIATION`] of its tensor's largest magnitude (or of
    /// [`NOISE_FLOOR`] of the largest of all tensors, if more): the backend picks fused kernels
    /// per program, by timing them (Burn's fusion with autotune).
    Reassociation,
}

/// The largest difference [`Agreement::Reassociation`] allows, relative to the largest magnitude
/// in the tensor: f32 sums in another order differ by a few units in the last place (about 1e-7
/// relative) per op, and a gradient passes through some dozens of ops; a wrong gradient (a
/// missing term, a stale or misplaced value) is off by far more. The GPT's gradients on fused
/// wgpu and on NdArray, wholly different kernels, agree within 1e-5 of each tensor's largest.
pub const REASSOCIATION: f32 = 1e-4;

/// The least magnitude [`REASSOCIATION`] is taken of, relative to the largest magnitude of all
/// the tensors compared: a gradient that is zero in exact arithmetic (an attention key's bias:
/// softmax ignores what it adds to every key alike) is rounding noise, about 5e-10 in the GPT's
/// step whose largest gradient is 3.9, and two kernels' noise differs by 100 % of itself.
pub const NOISE_FLOOR: f32 = 1e-3;

impl Agreement {
    /// What a backend can give, by its name as Burn's `Backend::name` writes it: Burn's fusion
    /// (`fusion<…>`) picks fused kernels per program; every other backend by op and shapes.
    pub fn for_backend(name: &str) -> Self {
        if name.starts_with("fusion<") {
            Agreement::Reassociation
        } else {
            Agreement::Bitwise
        }
    }

    /// `Ok` where `got` agrees with `want` (the same tensors' values, in the same order) this
    /// closely; otherwise the first tensor that does not, with its largest difference.
    pub fn check(self, got: &[Vec<f32>], want: &[Vec<f32>]) -> Result<(), String> {
        if got.len() != want.len() {
            return Err(format!("{} tensors, expected {}", got.len(), want.len()));
        }
        let everywhere = want.iter().flatten().fold(0f32, |m, v| m.max(v.abs()));
        for (i, (got, want)) in got.iter().zip(want).enumerate() {
            if got.len() != want.len() {
                return Err(format!(
                    "tensor {i}: {} values, expected {}",
                    got.len(),
                    want.len()
                ));
            }
            let largest = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            let allowed = match self {
                Agreement::Bitwise => 0.0,
                Agreement::Reassociation => REASSOCIATION * largest.max(NOISE_FLOOR * everywhere),
            };
            let differs = |(g, w): (&f32, &f32)| match self {
                Agreement::Bitwise => g.to_bits() != w.to_bits(),
                Agreement::Reassociation => {
                    g.is_nan() != w.is_nan() || (!g.is_nan() && (g - w).abs() > allowed)
                }
            };
            if got.iter().zip(want).any(differs) {
                let worst = got
                    .iter()
                    .zip(want)
                    .map(|(g, w)| (g - w).abs())
                    .fold(0f32, f32::max);
                return Err(format!(
                    "tensor {i} differs by up to {worst:e} (largest magnitude {largest:e}, \
                     {self:?} allows {allowed:e})"
                ));
            }
        }
        Ok(())
    }
}
