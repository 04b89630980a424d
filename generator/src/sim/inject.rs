//! How the simulator realises an injection plan (`crate::plan`): it places
//! the plan's work in its model at the plan's twin times, and names what it
//! did in the injection record.

use ground_truth::scenario::InjectionKind;

/// The mechanism the simulator's injection records name.
pub fn mechanism(kind: InjectionKind) -> &'static str {
    match kind {
        InjectionKind::CpuDeschedule => "sim:preemption",
        InjectionKind::HostPageFaultMinor | InjectionKind::HostPageFaultMajor => "sim:page-faults",
        InjectionKind::HostDelay => "sim:host-compute",
        InjectionKind::EventWait
        | InjectionKind::GraphDependency
        | InjectionKind::SyncWait
        | InjectionKind::KernelSlowdown
        | InjectionKind::DelayedMemcpy => "sim:longer-device-work",
        InjectionKind::RecordLoss => "sim:dropped-record",
        InjectionKind::OccupancyPressure => "sim:occupancy-hog-kernel",
        InjectionKind::StreamBacklog => "sim:backlog-kernels",
        InjectionKind::PcieContention => "sim:bulk-copies",
        InjectionKind::UnrelatedWork => "sim:concurrent-kernel",
    }
}
