//! The built-in printers' columns, as kube-apiserver's printers declare them.

use super::{CREATION_TIMESTAMP_DESCRIPTION, Column, NAME_DESCRIPTION};

/// A built-in resource kube-apiserver prints with its own columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Builtin {
    /// The generic convertor: `Name`, `Created At`.
    Default,
    Pod,
    Service,
    ConfigMap,
    Secret,
    Namespace,
    ServiceAccount,
    PersistentVolumeClaim,
    PersistentVolume,
    Event,
    EventsV1,
    Node,
    Endpoints,
    ReplicationController,
    Deployment,
    StatefulSet,
    DaemonSet,
    ReplicaSet,
    ControllerRevision,
    Job,
    CronJob,
    Lease,
    EndpointSlice,
    ValidatingWebhook,
    MutatingWebhook,
    RoleBinding,
    PriorityClass,
    StorageClass,
    Ingress,
    IngressClass,
    NetworkPolicy,
    PodDisruptionBudget,
    ResourceQuota,
    RuntimeClass,
    PodTemplate,
    CertificateSigningRequest,
    HorizontalPodAutoscaler,
}

const CONTAINERS_DESCRIPTION: &str = "Names of each container in the template.";
const IMAGES_DESCRIPTION: &str = "Images referenced by each container in the template.";

/// A built-in column from `name|type|priority|description` (an empty description means
/// `creationTimestamp`'s), or one of the shortcuts `name`, `wide name`, `age`, `containers`,
/// `images`.
fn spec_column(spec: &str) -> Column {
    match spec {
        "name" => Column::name_column(),
        "wide name" => Column::computed("Name", "string", NAME_DESCRIPTION, 1).with_format("name"),
        "age" => Column::computed("Age", "string", CREATION_TIMESTAMP_DESCRIPTION, 0),
        "containers" => Column::computed("Containers", "string", CONTAINERS_DESCRIPTION, 1),
        "images" => Column::computed("Images", "string", IMAGES_DESCRIPTION, 1),
        _ => {
            let mut parts = spec.splitn(4, '|');
            let name = parts.next().unwrap_or_default();
            let type_ = parts.next().unwrap_or_default();
            let priority = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            let description = match parts.next().unwrap_or_default() {
                "" => CREATION_TIMESTAMP_DESCRIPTION,
                description => description,
            };
            Column::computed(name, type_, description, priority)
        }
    }
}

impl Builtin {
    pub(super) fn lookup(group: &str, resource: &str) -> Builtin {
        match (group, resource) {
            ("", "pods") => Builtin::Pod,
            ("", "services") => Builtin::Service,
            ("", "configmaps") => Builtin::ConfigMap,
            ("", "secrets") => Builtin::Secret,
            ("", "namespaces") => Builtin::Namespace,
            ("", "serviceaccounts") => Builtin::ServiceAccount,
            ("", "persistentvolumeclaims") => Builtin::PersistentVolumeClaim,
            ("", "persistentvolumes") => Builtin::PersistentVolume,
            ("", "events") => Builtin::Event,
            ("events.k8s.io", "events") => Builtin::EventsV1,
            ("", "nodes") => Builtin::Node,
            ("", "endpoints") => Builtin::Endpoints,
            ("", "replicationcontrollers") => Builtin::ReplicationController,
            ("apps", "deployments") => Builtin::Deployment,
            ("apps", "statefulsets") => Builtin::StatefulSet,
            ("apps", "daemonsets") => Builtin::DaemonSet,
            ("apps", "replicasets") => Builtin::ReplicaSet,
            ("apps", "controllerrevisions") => Builtin::ControllerRevision,
            ("batch", "jobs") => Builtin::Job,
            ("batch", "cronjobs") => Builtin::CronJob,
            ("coordination.k8s.io", "leases") => Builtin::Lease,
            ("discovery.k8s.io", "endpointslices") => Builtin::EndpointSlice,
            ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
                Builtin::ValidatingWebhook
            }
            ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
                Builtin::MutatingWebhook
            }
            ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
                Builtin::RoleBinding
            }
            ("scheduling.k8s.io", "priorityclasses") => Builtin::PriorityClass,
            ("storage.k8s.io", "storageclasses") => Builtin::StorageClass,
            ("networking.k8s.io", "ingresses") => Builtin::Ingress,
            ("networking.k8s.io", "ingressclasses") => Builtin::IngressClass,
            ("networking.k8s.io", "networkpolicies") => Builtin::NetworkPolicy,
            ("policy", "poddisruptionbudgets") => Builtin::PodDisruptionBudget,
            ("", "resourcequotas") => Builtin::ResourceQuota,
            ("autoscaling", "horizontalpodautoscalers") => Builtin::HorizontalPodAutoscaler,
            ("", "podtemplates") => Builtin::PodTemplate,
            ("node.k8s.io", "runtimeclasses") => Builtin::RuntimeClass,
            ("certificates.k8s.io", "certificatesigningrequests") => {
                Builtin::CertificateSigningRequest
            }
            _ => Builtin::Default,
        }
    }

    pub(super) fn columns(self) -> Vec<Column> {
        // `name|type|priority|description`, or a shortcut: name, age, containers, images.
        let specs: &[&str] = match self {
            Builtin::Default => &["name", "Created At|date|0|"],
            Builtin::Pod => &[
                "name",
                "Ready|string|0|The aggregate readiness state of this pod for accepting traffic.",
                "Status|string|0|The aggregate status of the containers in this pod.",
                "Restarts|string|0|The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                "age",
                "IP|string|1|IP address allocated to the pod.",
                "Node|string|1|Name of the node the pod is scheduled to.",
                "Nominated Node|string|1|Name of the node the pod is nominated to by preemption.",
                "Readiness Gates|string|1|Readiness gates of the pod.",
            ],
            Builtin::Service => &[
                "name",
                "Type|string|0|How the service is exposed.",
                "Cluster-IP|string|0|The IP address of the service.",
                "External-IP|string|0|External addresses of the service.",
                "Port(s)|string|0|The ports exposed by the service.",
                "age",
                "Selector|string|1|Route service traffic to pods with labels matching this selector.",
            ],
            Builtin::ConfigMap => &[
                "name",
                "Data|string|0|Data contains the configuration data.",
                "age",
            ],
            Builtin::Secret => &[
                "name",
                "Type|string|0|Used to facilitate programmatic handling of secret data.",
                "Data|string|0|Data contains the secret data.",
                "age",
            ],
            Builtin::Namespace => &["name", "Status|string|0|The status of the namespace", "age"],
            Builtin::ServiceAccount => &[
                "name",
                "Secrets|string|0|Secrets the service account references.",
                "age",
            ],
            Builtin::PersistentVolumeClaim => &[
                "name",
                "Status|string|0|The current phase of the claim.",
                "Volume|string|0|The binding reference to the PersistentVolume backing this claim.",
                "Capacity|string|0|The actual resources of the underlying volume.",
                "Access Modes|string|0|The actual access modes the volume backing the PVC has.",
                "StorageClass|string|0|StorageClass of the pvc",
                "VolumeAttributesClass|string|0|VolumeAttributesClass of the pvc",
                "age",
                "VolumeMode|string|1|What type of volume is required by the claim.",
            ],
            Builtin::PersistentVolume => &[
                "name",
                "Capacity|string|0|The persistent volume's resources and capacity.",
                "Access Modes|string|0|All ways the volume can be mounted.",
                "Reclaim Policy|string|0|What happens to the volume when released from its claim.",
                "Status|string|0|The current phase of the volume.",
                "Claim|string|0|The claim bound to the volume.",
                "StorageClass|string|0|StorageClass of the pv",
                "VolumeAttributesClass|string|0|VolumeAttributesClass of the pv",
                "Reason|string|0|A brief CamelCase string that describes any failure.",
                "age",
                "VolumeMode|string|1|Whether the volume is a formatted filesystem or a raw block device.",
            ],
            // Events are the one table whose `Name` is not first.
            Builtin::Event | Builtin::EventsV1 => &[
                "Last Seen|string|0|The time at which the most recent occurrence of this event was recorded.",
                "Type|string|0|Type of this event (Normal, Warning).",
                "Reason|string|0|A short, machine understandable string that gives the reason for the transition into the object's current status.",
                "Object|string|0|The object that this event is about.",
                "Subobject|string|1|The part of the object this event is about.",
                "Source|string|1|The component reporting this event.",
                "Message|string|0|A human-readable description of the status of this operation.",
                "First Seen|string|1|The time at which the event was first recorded.",
                "Count|string|1|The number of times this event has occurred.",
                "wide name",
            ],
            Builtin::Node => &[
                "name",
                "Status|string|0|The status of the node",
                "Roles|string|0|The roles of the node",
                "age",
                "Version|string|0|Kubelet Version reported by the node.",
                "Internal-IP|string|1|List of addresses reachable to the node.",
                "External-IP|string|1|List of addresses reachable to the node.",
                "OS-Image|string|1|OS Image reported by the node.",
                "Kernel-Version|string|1|Kernel Version reported by the node.",
                "Container-Runtime|string|1|ContainerRuntime Version reported by the node.",
            ],
            Builtin::Endpoints => &[
                "name",
                "Endpoints|string|0|The set of all endpoints.",
                "age",
            ],
            Builtin::ReplicationController | Builtin::ReplicaSet => &[
                "name",
                "Desired|integer|0|Number of desired replicas.",
                "Current|integer|0|The most recently observed number of replicas.",
                "Ready|integer|0|The number of ready replicas.",
                "age",
                "containers",
                "images",
                "Selector|string|1|A label query over pods that should match the replica count.",
            ],
            Builtin::Deployment => &[
                "name",
                "Ready|string|0|Number of the pod with ready state",
                "Up-to-date|string|0|Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                "Available|string|0|Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                "age",
                "containers",
                "images",
                "Selector|string|1|Label selector for pods.",
            ],
            Builtin::StatefulSet => &[
                "name",
                "Ready|string|0|Number of the pod with ready state",
                "age",
                "containers",
                "images",
            ],
            Builtin::DaemonSet => &[
                "name",
                "Desired|integer|0|The total number of nodes that should be running the daemon pod.",
                "Current|integer|0|The number of nodes running at least one daemon pod and are supposed to.",
                "Ready|integer|0|The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
                "Up-to-date|integer|0|The total number of nodes that are running updated daemon pod.",
                "Available|integer|0|The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
                "Node Selector|string|0|NodeSelector is a selector which must be true for the pod to fit on a node.",
                "age",
                "containers",
                "images",
                "Selector|string|1|A label query over pods that are managed by the daemon set.",
            ],
            Builtin::ControllerRevision => &[
                "name",
                "Controller|string|0|Controller of the object",
                "Revision|string|0|Revision indicates the revision of the state represented by Data.",
                "age",
            ],
            Builtin::Job => &[
                "name",
                "Status|string|0|Status of the job.",
                "Completions|string|0|The number of pods which reached phase Succeeded.",
                "Duration|string|0|Time required to complete the job.",
                "age",
                "containers",
                "images",
                "Selector|string|1|A label query over pods that should match the pod count.",
            ],
            Builtin::CronJob => &[
                "name",
                "Schedule|string|0|The schedule in Cron format.",
                "Timezone|string|0|The time zone name for the given schedule.",
                "Suspend|boolean|0|This flag tells the controller to suspend subsequent executions.",
                "Active|integer|0|A list of pointers to currently running jobs.",
                "Last Schedule|string|0|Information when was the last time the job was successfully scheduled.",
                "age",
                "containers",
                "images",
                "Selector|string|1|A label query over pods that should match the pod count.",
            ],
            Builtin::Lease => &[
                "name",
                "Holder|string|0|holderIdentity contains the identity of the holder of a current lease.",
                "age",
            ],
            Builtin::EndpointSlice => &[
                "name",
                "AddressType|string|0|addressType specifies the type of address carried by this EndpointSlice.",
                "Ports|string|0|ports specifies the list of network ports exposed by each endpoint in this slice.",
                "Endpoints|string|0|endpoints is a list of unique endpoints in this slice.",
                "age",
            ],
            Builtin::ValidatingWebhook | Builtin::MutatingWebhook => &[
                "name",
                "Webhooks|integer|0|Webhooks indicates the number of webhooks registered in this configuration",
                "age",
            ],
            Builtin::RoleBinding => &[
                "name",
                "Role|string|0|RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
                "age",
                "Users|string|1|Users in the roleBinding",
                "Groups|string|1|Groups in the roleBinding",
                "ServiceAccounts|string|1|ServiceAccounts in the roleBinding",
            ],
            Builtin::ResourceQuota => &[
                "name",
                "age",
                "Request|string|0|Request represents a minimum amount of cpu/memory that a container may consume.",
                "Limit|string|0|Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ],
            Builtin::HorizontalPodAutoscaler => &[
                "name",
                "Reference|string|0|reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
                "Targets|string|0|metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).",
                "MinPods|string|0|minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
                "MaxPods|integer|0|maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
                "Replicas|integer|0|currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
                "age",
            ],
            Builtin::RuntimeClass => &[
                "name",
                "Handler|string|0|handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class.",
                "age",
            ],
            Builtin::PodTemplate => &[
                "Template|string|0|Name must be unique within a namespace.",
                "Containers|string|0|Names of each container in the template.",
                "Images|string|0|Images referenced by each container in the template.",
                "Pod Labels|string|0|The labels for the pod template.",
            ],
            Builtin::CertificateSigningRequest => &[
                "name",
                "age",
                "SignerName|string|0|signerName indicates the requested signer, and is a qualified name.",
                "Requestor|string|0|Name of the user who requested the certificate.",
                "RequestedDuration|string|0|requestedDuration is the requested duration of validity of the issued certificate.",
                "Condition|string|0|The status of the request.",
            ],
            Builtin::PriorityClass => &[
                "name",
                "Value|integer|0|The value of this priority class.",
                "Global-Default|boolean|0|Whether this priority class is the default for pods without a priority class.",
                "age",
                "PreemptionPolicy|string|0|The policy for preempting pods with lower priority.",
            ],
            Builtin::StorageClass => &[
                "name",
                "Provisioner|string|0|Provisioner indicates the type of the provisioner.",
                "ReclaimPolicy|string|0|The reclaim policy of dynamically provisioned volumes.",
                "VolumeBindingMode|string|0|How PersistentVolumeClaims should be provisioned and bound.",
                "AllowVolumeExpansion|string|0|Whether the storage class allows volume expansion.",
                "age",
            ],
            Builtin::Ingress => &[
                "name",
                "Class|string|0|The name of the IngressClass resource that should be used for additional configuration",
                "Hosts|string|0|Hosts that incoming requests are matched against before the ingress rule",
                "Address|string|0|Address is a list containing ingress points for the load-balancer",
                "Ports|string|0|Ports of TLS configurations that open",
                "age",
            ],
            Builtin::IngressClass => &[
                "name",
                "Controller|string|0|Controller that is responsible for handling this class",
                "Parameters|string|0|A reference to a resource with additional parameters",
                "age",
            ],
            Builtin::NetworkPolicy => &[
                "name",
                "Pod-Selector|string|0|Selects the pods to which this NetworkPolicy object applies.",
                "age",
            ],
            Builtin::PodDisruptionBudget => &[
                "name",
                "Min Available|string|0|The minimum number of pods that must be available.",
                "Max Unavailable|string|0|The maximum number of pods that may be unavailable.",
                "Allowed Disruptions|integer|0|Calculated number of pods that may be disrupted at this time.",
                "age",
            ],
        };
        specs.iter().map(|spec| spec_column(spec)).collect()
    }
}
