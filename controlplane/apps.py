from django.apps import AppConfig


class ControlPlaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Control plane"

    def ready(self) -> None:
        from controlplane import audit

        audit.connect()
