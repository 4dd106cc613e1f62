"""A cluster's security page: SASL users (the password is shown once) and ACLs.

Included by ``console_urls``; the pages use the same services as the REST API and the
agent API, and the same tenancy choke point as the rest of the console.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from tenancy.console import one_time_secret
from tenancy.console.forms import add_service_errors
from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.models import VirtualCluster
from virtualclusters.security import services
from virtualclusters.security.models import Acl, SaslCredential


def _choices(field: str) -> list[tuple[str, str]]:
    return Acl.choices_of(field)


class CredentialForm(forms.Form):
    username = forms.CharField(max_length=128, help_text=services.USERNAME_RULE + ".")
    password = forms.CharField(
        required=False,
        strip=False,
        max_length=services.MAX_PASSWORD_LENGTH,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="Leave empty to get a generated password (shown once).",
    )
    superuser = forms.BooleanField(required=False, help_text="Bypasses ACLs.")
    read_only = forms.BooleanField(
        required=False, label="Read-only", help_text="May only read and describe."
    )


class AclForm(forms.Form):
    principal = forms.CharField(
        max_length=255, initial="User:", help_text="User:<name>, or User:* for everyone"
    )
    permission = forms.ChoiceField(choices=_choices("permission"), initial="allow")
    operation = forms.ChoiceField(choices=_choices("operation"), initial="read")
    resource_type = forms.ChoiceField(choices=_choices("resource_type"), label="Resource")
    pattern_type = forms.ChoiceField(choices=_choices("pattern_type"), label="Match")
    resource_name = forms.CharField(
        max_length=255, label="Name", help_text="a name, * for all, or a prefix"
    )
    host = forms.CharField(max_length=255, initial="*")


def render_security_page(
    request: HttpRequest, cluster: VirtualCluster, *, status: int = 200, **extra: Any
) -> HttpResponse:
    context = {
        "cluster": cluster,
        "credentials": cluster.sasl_credentials.order_by("username"),
        "acls": cluster.acls.order_by("resource_type", "resource_name", "principal", "id"),
        "credential_form": CredentialForm(),
        "acl_form": AclForm(),
        **extra,
    }
    return render(request, "virtualclusters/security.html", context, status=status)


@login_required
def security_page(request: HttpRequest, cluster_id: str) -> HttpResponse:
    """The page; right after a SASL user was created it shows the password, once."""
    cluster = cluster_or_404(request, cluster_id)
    found = one_time_secret.take(request, "sasl-user", scope=cluster.public_id)
    if found is None:
        return render_security_page(request, cluster)
    credential = cluster.sasl_credentials.filter(public_id=found[0]).first()
    if credential is None:
        return render_security_page(request, cluster)
    password = found[1]
    client_config = "\n".join(
        [
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=SCRAM-SHA-512",
            f"sasl.username={credential.username}",
            f"sasl.password={password}",
        ]
    )
    response = render_security_page(
        request,
        cluster,
        new_credential=credential,
        new_password=password,
        client_config=client_config,
    )
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def credential_create(request: HttpRequest, cluster_id: str) -> HttpResponse:
    """Create a SASL user, then redirect to the page, which shows its password once."""
    cluster = cluster_or_404(request, cluster_id)
    form = CredentialForm(request.POST)
    if form.is_valid():
        try:
            credential, password = services.sasl_credential_create(
                cluster=cluster, **form.cleaned_data
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            one_time_secret.keep(
                request, "sasl-user", scope=cluster.public_id, key_id=credential.public_id,
                plaintext=password,
            )  # fmt: skip
            return redirect("cluster-security", cluster_id=cluster.public_id)
    return render_security_page(request, cluster, credential_form=form, status=400)


@login_required
@require_POST
def credential_delete(request: HttpRequest, cluster_id: str, credential_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    credential = get_object_or_404(SaslCredential, cluster=cluster, public_id=credential_id)
    services.sasl_credential_delete(credential=credential)
    messages.success(request, f"SASL user {credential.username} deleted.")
    return redirect("cluster-security", cluster_id=cluster.public_id)


@login_required
@require_POST
def acl_create(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    form = AclForm(request.POST)
    if form.is_valid():
        try:
            binding = services.acl_binding(dict(form.cleaned_data))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            acl, created = services.acl_create(cluster=cluster, binding=binding)
            messages.success(request, f"ACL {'added' if created else 'already present'}: {acl}")
            return redirect("cluster-security", cluster_id=cluster.public_id)
    return render_security_page(request, cluster, acl_form=form, status=400)


@login_required
@require_POST
def acl_delete(request: HttpRequest, cluster_id: str, acl_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    acl = get_object_or_404(Acl, cluster=cluster, public_id=acl_id)
    services.acl_delete(acl=acl)
    messages.success(request, f"ACL removed: {acl}")
    return redirect("cluster-security", cluster_id=cluster.public_id)


urlpatterns = [
    path("clusters/<str:cluster_id>/security", security_page, name="cluster-security"),
    path(
        "clusters/<str:cluster_id>/sasl-users/new",
        credential_create,
        name="sasl-credential-create",
    ),
    path(
        "clusters/<str:cluster_id>/sasl-users/<str:credential_id>/delete",
        credential_delete,
        name="sasl-credential-delete",
    ),
    path("clusters/<str:cluster_id>/acls/new", acl_create, name="acl-create"),
    path("clusters/<str:cluster_id>/acls/<str:acl_id>/delete", acl_delete, name="acl-delete"),
]
