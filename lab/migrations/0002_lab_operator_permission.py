"""Lab operators may queue jobs and use the hosts page."""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations


def grant(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="lab operator")
    group.permissions.add(Permission.objects.get(codename="operate_lab",
                                                 content_type__app_label="worker"))


class Migration(migrations.Migration):
    dependencies = [("worker", "0001_initial"), ("submissions", "0004_groups")]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
