from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from submissions import views

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("signup/sent/", views.signup_sent, name="signup_sent"),
    path("activate/<str:uidb64>/<str:token>/", views.activate, name="activate"),
    path("password-reset/", views.password_reset, name="password_reset"),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(template_name="accounts/password_reset_done.html"),
        name="password_reset_done",
    ),
    path(
        "reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(
            template_name="accounts/password_reset_confirm.html",
            success_url=reverse_lazy("accounts:password_reset_complete"),
        ),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/",
        auth_views.PasswordResetCompleteView.as_view(
            template_name="accounts/password_reset_complete.html"
        ),
        name="password_reset_complete",
    ),
    path("login/", views.sign_in, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.profile, name="profile"),
    path("runs/", views.my_runs, name="runs"),
    path("runs/<int:run_id>/withdraw/", views.withdraw, name="withdraw"),
    path("runs/<int:run_id>/delete/", views.delete, name="delete"),
    path("keys/", views.api_keys, name="keys"),
    path("keys/<int:pk>/revoke/", views.revoke_key, name="revoke_key"),
]
