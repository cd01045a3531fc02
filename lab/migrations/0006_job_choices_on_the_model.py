# A job's provider and profile choices live on the model; its harness has a validator (issue 16).

import lab.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('worker', '0005_hostkey'),
    ]

    operations = [
        migrations.AlterField(
            model_name='benchmarkjob',
            name='harness',
            field=models.CharField(default='raw', max_length=20, validators=[lab.models.known_harness]),
        ),
        migrations.AlterField(
            model_name='benchmarkjob',
            name='profile',
            field=models.CharField(blank=True, choices=[('smoke', 'smoke'), ('core', 'core'), ('full', 'full')], default='smoke', max_length=20),
        ),
        migrations.AlterField(
            model_name='benchmarkjob',
            name='provider',
            field=models.CharField(choices=[('auto', 'auto-detect'), ('openai', 'OpenAI-compatible'), ('ollama', 'Ollama')], default='auto', max_length=20),
        ),
    ]
