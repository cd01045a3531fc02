from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from submissions import views

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("login/", views.sign_in, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.profile, name="profile"),
    path("runs/", views.my_runs, name="runs"),
    path("runs/<int:run_id>/withdraw/", views.withdraw, name="withdraw"),
    path("runs/<int:run_id>/delete/", views.delete, name="delete"),
    path("keys/", views.api_keys, name="keys"),
    path("keys/<int:pk>/revoke/", views.revoke_key, name="revoke_key"),
]
