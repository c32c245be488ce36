//! What a measured training step measured, as data: the step, each top-level region instance,
//! and what was made outside regions. The recording fills it, the planner reads it; its JSON is
//! the same for both Burn crates.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::host::mib;
use crate::op_kind::OpKind;
use crate::treatment::Treatment;

/// One training step, measured region by region (made by [`StepReport::measure`], or by
/// [`Profile::measure`](crate::planner::Profile::measure) for each treatment).
///
/// Bytes are those of the [`MemoryMeter`](super::MemoryMeter): host bytes on the CPU, device bytes
/// on a GPU. Times are wall-clock; on a lazy backend (CUDA) a region's forward time is the time to
/// *queue* its ops, and only the recompute times, which include reading values back, are
/// meaningful.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct StepReport {
    /// What the bytes are.
    pub meter: String,
    /// The most bytes in use during the step, above those in use when it began.
    pub peak_bytes: u64,
    /// Where the step was when it reached its peak (`forward, in name#3`, `backward, recomputing
    /// name#3`, `after name#15`, ...).
    pub peak_at: String,
    /// Bytes in use when the step ended, above its start (what the step leaves: the optimizer's
    /// state on a first step, say).
    pub end_bytes: i64,
    /// The step's wall-clock time, in seconds.
    pub seconds: f64,
    /// The most bytes regions held in host memory at once during the step (offloading
    /// regions, see `Region::offloaded`), above those held when it began. On a CPU backend they
    /// are also in `peak_bytes` (host and device memory are one); on a GPU they are not.
    #[serde(default)]
    pub offloaded_peak_bytes: u64,
    /// On a device, the most bytes its memory manager held during the step (absolute, its pools'
    /// pages, used or not: what `nvidia-smi` shows and what decides whether a step fits); read at
    /// the region events like the peak. `None` on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_peak_bytes: Option<u64>,
    /// Each top-level region instance (regions not nested in another), in the order opened.
    pub regions: Vec<RegionRecord>,
    /// Bytes made by tracked ops outside every region, by [`OpKind`] (what autodiff may store
    /// for them: an upper bound of what it holds). The Burn 0.22 crate sees no op outside its
    /// regions: empty there.
    pub outside_by_kind: BTreeMap<OpKind, u64>,
    /// The same bytes by site: before the first region, or after which region instance's name.
    pub outside_by_site: BTreeMap<String, u64>,
    /// What forward left held outside top-level regions, by site (`before the first region`,
    /// `after name`): the bytes in use when a region opened (or when backward began) less those
    /// when the previous one closed (or the step began), read by the meter. Both Burn crates
    /// report it (the 0.22 crate sees no op outside its regions, but the meter sees their bytes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub held_outside_by_site: BTreeMap<String, i64>,
    /// The most bytes in use, above the step's start, outside the regions' backward windows
    /// (see [`RegionRecord::backward_peak_bytes`]): in forward, and in backward before the
    /// first recompute. The planner's peak model reads it with the windows' peaks. `None` in
    /// reports written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_windows_peak_bytes: Option<u64>,
}

/// One top-level region instance of a profiled step.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct RegionRecord {
    /// The region's name ([`RegionName`](crate::RegionName)).
    pub name: String,
    /// Which instance of the name ([`RegionId::index`](crate::RegionId)).
    pub index: u64,
    /// How a plan had it run; `None`: as the code says (`"as-written"` in JSON).
    #[serde(with = "as_written")]
    pub treatment: Option<Treatment>,
    /// Bytes in use when the region closed less those when it opened: what its forward leaves
    /// held until backward (its boundary and what its policy keeps; everything autodiff stores
    /// for its ops if kept). Negative when its ops freed more than they kept (an input consumed
    /// in place).
    pub held_bytes: i64,
    /// The most bytes in use while its forward ran, above those when it opened.
    pub forward_peak_bytes: u64,
    /// Its forward's wall-clock time, in seconds.
    pub forward_seconds: f64,
    /// Bytes of the op outputs backward recomputed for it.
    pub recomputed_bytes: u64,
    /// The time backward spent recomputing them, in seconds.
    pub recompute_seconds: f64,
    /// How many op outputs backward recomputed for it.
    pub recomputed_ops: u64,
    /// Bytes its forward moved to host memory (an offloading region's stored operands): part of
    /// `held_bytes` on a CPU backend, not on the device's count on a GPU.
    #[serde(default)]
    pub offloaded_bytes: u64,
    /// The most bytes in use, above the step's start, in its backward window: from backward's
    /// first recompute for it until the first recompute for another region (or the step's end),
    /// so its recompute, its backward and what backward runs until the next region recomputes.
    /// 0 where backward recomputed nothing for it (a kept region).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backward_peak_bytes: u64,
}

fn is_zero(bytes: &u64) -> bool {
    *bytes == 0
}

impl RegionRecord {
    /// `name#index`.
    pub fn id(&self) -> String {
        format!("{}#{}", self.name, self.index)
    }
}

impl StepReport {
    /// The bytes held at region boundaries (summed [`RegionRecord::held_bytes`]) per region name,
    /// with the instance count, the recomputed bytes and the recompute time, in the order the
    /// names first appeared.
    pub fn by_name(&self) -> Vec<NameTotals> {
        let mut totals: Vec<NameTotals> = Vec::new();
        for region in &self.regions {
            let at = match totals.iter().position(|t| t.name == region.name) {
                Some(at) => at,
                None => {
                    totals.push(NameTotals {
                        name: region.name.clone(),
                        ..NameTotals::default()
                    });
                    totals.len() - 1
                }
            };
            let total = &mut totals[at];
            total.instances += 1;
            total.held_bytes += region.held_bytes;
            total.recomputed_bytes += region.recomputed_bytes;
            total.recompute_seconds += region.recompute_seconds;
            total.forward_seconds += region.forward_seconds;
        }
        totals
    }

    /// What the regions hold, summed (a region that freed more than it kept counts as none).
    pub fn held_by_regions(&self) -> u64 {
        self.regions
            .iter()
            .map(|r| r.held_bytes.max(0) as u64)
            .sum()
    }

    /// Bytes made outside regions, in all.
    pub fn outside_bytes(&self) -> u64 {
        self.outside_by_kind.values().sum()
    }

    /// The same, `None` where no op outside regions was seen: not measured, which is not 0
    /// bytes made (the Burn 0.22 crate sees no op outside its regions; a step can fail before
    /// its first). What every report says of them reads this.
    pub(crate) fn outside_made(&self) -> Option<u64> {
        (!self.outside_by_kind.is_empty()).then(|| self.outside_bytes())
    }

    /// What forward left held outside top-level regions, in all
    /// ([`StepReport::held_outside_by_site`]).
    pub fn held_outside_bytes(&self) -> i64 {
        self.held_outside_by_site.values().sum()
    }
}

/// A region name's instances of one step, added up ([`StepReport::by_name`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct NameTotals {
    /// The region name.
    pub name: String,
    /// How many top-level instances it had.
    pub instances: usize,
    /// Their [`RegionRecord::held_bytes`], summed.
    pub held_bytes: i64,
    /// Their forward time, summed, in seconds.
    pub forward_seconds: f64,
    /// Their recomputed bytes, summed.
    pub recomputed_bytes: u64,
    /// Their recompute time, summed, in seconds.
    pub recompute_seconds: f64,
}

/// Signed bytes as MiB.
pub(crate) fn mib_signed(bytes: i64) -> f64 {
    let size = mib(bytes.unsigned_abs() as usize);
    if bytes < 0 { -size } else { size }
}

impl fmt::Display for StepReport {
    /// The report as a table: the step, each region name, what was made outside regions.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "step: peak {:.1} MiB ({}), {:.3} s; {}; offloaded to host memory: peak {:.1} MiB",
            mib(self.peak_bytes as usize),
            self.peak_at,
            self.seconds,
            self.meter,
            mib(self.offloaded_peak_bytes as usize)
        )?;
        writeln!(
            f,
            "{:<44} {:>5} {:>11} {:>11} {:>10} {:>11}",
            "region", "count", "held MiB", "recomp MiB", "recomp s", "forward s"
        )?;
        for total in self.by_name() {
            writeln!(
                f,
                "{:<44} {:>5} {:>11.2} {:>11.2} {:>10.3} {:>11.3}",
                shorten(&total.name, 44),
                total.instances,
                mib_signed(total.held_bytes),
                mib(total.recomputed_bytes as usize),
                total.recompute_seconds,
                total.forward_seconds
            )?;
        }
        let mut held: Vec<_> = self.held_outside_by_site.iter().collect();
        held.sort_by(|a, b| b.1.cmp(a.1));
        write!(
            f,
            "held outside regions after forward: {:.1} MiB",
            mib_signed(self.held_outside_bytes())
        )?;
        for (site, bytes) in held.iter().take(3) {
            write!(f, "; {site} {:.1}", mib_signed(**bytes))?;
        }
        writeln!(f)?;
        let Some(made) = self.outside_made() else {
            return writeln!(
                f,
                "made outside regions: not measured (no op outside regions seen)"
            );
        };
        let mut kinds: Vec<_> = self.outside_by_kind.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1));
        write!(f, "made outside regions: {:.1} MiB", mib(made as usize))?;
        for (kind, bytes) in kinds.iter().take(4) {
            write!(f, "; {kind:?} {:.1}", mib(**bytes as usize))?;
        }
        let mut sites: Vec<_> = self.outside_by_site.iter().collect();
        sites.sort_by(|a, b| b.1.cmp(a.1));
        if let Some((site, bytes)) = sites.first() {
            write!(
                f,
                "; largest site: {site} ({:.1} MiB)",
                mib(**bytes as usize)
            )?;
        }
        writeln!(f)
    }
}

/// `text` cut to `width` characters, keeping its end (a name's most specific part).
pub(crate) fn shorten(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    let tail: String = text.chars().skip(count - (width - 1)).collect();
    format!("…{tail}")
}

/// A treatment in JSON: its name, or `"as-written"` for none.
mod as_written {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::treatment::Treatment;

    const AS_WRITTEN: &str = "as-written";

    pub fn serialize<S: Serializer>(
        treatment: &Option<Treatment>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match treatment {
            Some(treatment) => treatment.serialize(serializer),
            None => serializer.serialize_str(AS_WRITTEN),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Treatment>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Treatment(Treatment),
            Other(String),
        }
        match Either::deserialize(deserializer)? {
            Either::Treatment(Treatment::AsWritten) => Ok(None),
            Either::Treatment(treatment) => Ok(Some(treatment)),
            Either::Other(name) if name == AS_WRITTEN => Ok(None),
            Either::Other(name) => Err(serde::de::Error::unknown_variant(
                &name,
                &[
                    "as-written",
                    "keep",
                    "save-compute-bound",
                    "recompute-all",
                    "offload",
                ],
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step where no op outside regions was seen (the Burn 0.22 crate sees none) says so, not
    /// "0.0 MiB made"; a step where some were counts them.
    #[test]
    fn what_was_made_outside_regions_is_said_as_measured() {
        let unseen = StepReport::default().to_string();
        assert!(
            unseen.contains("made outside regions: not measured"),
            "{unseen}"
        );
        let mut seen = StepReport::default();
        seen.outside_by_kind.insert(OpKind::Matmul, 3 << 20);
        let seen = seen.to_string();
        assert!(seen.contains("made outside regions: 3.0 MiB"), "{seen}");
    }
}
