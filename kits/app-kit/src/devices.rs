//! The devices a trainer runs on, as `--devices` names them for both trainers (the Burn 0.21
//! DenseNet trainer and `train22`): [`DeviceSpec`] and [`parse_devices`]. No Burn in it: each
//! trainer makes its Burn's devices from the list.

use serde::{Deserialize, Serialize};

/// One device of `--devices`.
///
/// ```
/// use app_kit::devices::{DeviceSpec, parse_devices};
///
/// assert_eq!(parse_devices("wgpu,wgpu").unwrap(), [DeviceSpec::Wgpu(None); 2]);
/// assert_eq!(parse_devices("2").unwrap(), [DeviceSpec::Cpu; 2]);
/// assert_eq!(DeviceSpec::Cuda(1).to_string(), "cuda:1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceSpec {
    /// The CPU (burn-flex).
    Cpu,
    /// A CUDA GPU, by index.
    Cuda(usize),
    /// A wgpu adapter (Vulkan, Metal, DirectX; Mesa's lavapipe on a CPU): `None` for the
    /// default one, or a discrete GPU by index.
    Wgpu(Option<usize>),
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(index) => write!(f, "cuda:{index}"),
            DeviceSpec::Wgpu(None) => write!(f, "wgpu"),
            DeviceSpec::Wgpu(Some(index)) => write!(f, "wgpu:{index}"),
        }
    }
}

/// Parses `--devices`: `cpu` (also `flex`), `cuda` (= `cuda:0`), `cuda:N`, `wgpu` (the default
/// adapter), `wgpu:N`, comma-separated, all of one kind; or a count, `N` CPU devices.
pub fn parse_devices(list: &str) -> Result<Vec<DeviceSpec>, String> {
    if let Ok(count) = list.trim().parse::<usize>() {
        if count == 0 {
            return Err("--devices 0: train on one device at least".to_string());
        }
        return Ok(vec![DeviceSpec::Cpu; count]);
    }
    let devices = list
        .split(',')
        .map(|item| {
            let item = item.trim();
            match item.split_once(':') {
                None if item == "cpu" || item == "flex" => Ok(DeviceSpec::Cpu),
                None if item == "cuda" => Ok(DeviceSpec::Cuda(0)),
                None if item == "wgpu" => Ok(DeviceSpec::Wgpu(None)),
                Some(("cuda", index)) => index.parse().map(DeviceSpec::Cuda).map_err(|_| {
                    format!("`{item}` in --devices: the CUDA index must be a number, as in cuda:0")
                }),
                Some(("wgpu", index)) => index
                    .parse()
                    .map(|index| DeviceSpec::Wgpu(Some(index)))
                    .map_err(|_| {
                        format!(
                            "`{item}` in --devices: the wgpu index must be a number, as in wgpu:0"
                        )
                    }),
                _ => Err(format!(
                    "`{item}` in --devices is not a device: use cpu, cuda:0,cuda:1,… or wgpu"
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let first = devices[0];
    if devices
        .iter()
        .any(|d| std::mem::discriminant(d) != std::mem::discriminant(&first))
    {
        return Err(format!(
            "--devices {list} mixes kinds of device; give only cpu, only cuda:N or only wgpu \
             devices"
        ));
    }
    Ok(devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_device_lists() {
        assert_eq!(parse_devices("cpu").unwrap(), vec![DeviceSpec::Cpu]);
        assert_eq!(
            parse_devices("cuda:0, cuda:3").unwrap(),
            vec![DeviceSpec::Cuda(0), DeviceSpec::Cuda(3)]
        );
        assert_eq!(parse_devices("cuda").unwrap(), vec![DeviceSpec::Cuda(0)]);
        assert!(parse_devices("gpu").unwrap_err().contains("`gpu`"));
        assert!(parse_devices("cuda:x").unwrap_err().contains("number"));
        assert!(parse_devices("cpu,cuda:0").unwrap_err().contains("mixes"));
        assert_eq!(
            parse_devices("wgpu,wgpu").unwrap(),
            vec![DeviceSpec::Wgpu(None); 2]
        );
        assert_eq!(
            parse_devices("wgpu:1").unwrap(),
            vec![DeviceSpec::Wgpu(Some(1))]
        );
        assert!(parse_devices("wgpu:x").unwrap_err().contains("number"));
        assert!(parse_devices("wgpu,cpu").unwrap_err().contains("mixes"));
        assert!(parse_devices("").is_err());
        assert_eq!(parse_devices("flex").unwrap(), vec![DeviceSpec::Cpu]);
        assert_eq!(parse_devices("3").unwrap(), vec![DeviceSpec::Cpu; 3]);
        assert!(parse_devices("0").unwrap_err().contains("one device"));
    }
}
