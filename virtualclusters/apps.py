from django.apps import AppConfig


class VirtualClustersConfig(AppConfig):
    name = "virtualclusters"
    verbose_name = "Virtual clusters"
