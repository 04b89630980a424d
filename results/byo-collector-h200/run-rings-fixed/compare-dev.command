causalbench workload --suite dev --sample 30 --out cmp-dev --compare-cupti
