from django.apps import AppConfig


class ControlPlaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Control plane"

    def ready(self) -> None:
        """Wire what the apps below cannot import: the audit log's models (every app's)."""
        from team import audit
        from team.models import ApiKey
        from tenancy.models import Invitation, Membership
        from virtualclusters.models import Acl, AgentKey, SaslCredential, VirtualCluster

        audit.connect(
            {
                VirtualCluster: "cluster",
                AgentKey: "agent_key",
                ApiKey: "api_key",
                SaslCredential: "sasl_user",
                Acl: "acl",
                Membership: "member",
                Invitation: "invitation",
            }
        )
