//! gRPC contracts between components, generated from `proto/`.

/// `SnapshotService`, served by backup-runner.
pub mod snapshot {
    pub mod v1 {
        tonic::include_proto!("navique.snapshot.v1");
    }
}

/// `ApprovalEvents`, served by service-lifecycle-controller.
pub mod approvals {
    pub mod v1 {
        tonic::include_proto!("navique.approvals.v1");
    }
}
