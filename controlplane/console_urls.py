"""The web console's pages (placeholder until the console lands)."""

from django.http import HttpResponse
from django.urls import path


def dashboard(request):
    return HttpResponse("Floe console")


urlpatterns = [path("", dashboard, name="dashboard")]
