causalbench workload --suite dev --sample 20 --out cmp-dev --compare-cupti
