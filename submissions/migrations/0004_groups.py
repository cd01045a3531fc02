"""The moderator and lab operator groups, with their permissions."""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations


def create_groups(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    moderator, _ = Group.objects.get_or_create(name="moderator")
    moderator.permissions.add(
        Permission.objects.get(codename="moderate_submission", content_type__app_label="submissions")
    )
    Group.objects.get_or_create(name="lab operator")


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["moderator", "lab operator"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("submissions", "0003_accounts_keys_moderation"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
