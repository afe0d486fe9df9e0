"""Sessions (`/v1/sessions`): the tenant's sessions; what one holds, and forgetting it."""
