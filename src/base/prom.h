/*
 * Prometheus text exposition (format 0.0.4) helpers shared by every
 * /metrics producer (the server, the pipelines, the front end).
 */
#ifndef VR_BASE_PROM_H
#define VR_BASE_PROM_H

/* s as a quoted label value: "..." with backslash, double quote and
 * newline escaped, as the format asks (JSON escaping is not the same: it
 * writes \u00XX, which the format does not know). NULL on out of memory;
 * free with vr_free. */
char *vr_prom_quote(const char *s);

#endif
