"""Who may send how much: credentials to tenants (`tenants`), per-tenant budgets per window
(`ratelimit`) shared across instances through Redis (`redis_sync`), and the bounded queue of
requests waiting for a free replica (`admission`)."""
