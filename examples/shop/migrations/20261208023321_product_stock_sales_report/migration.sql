-- AlterTable
ALTER TABLE "Product" ADD COLUMN     "stock" INTEGER NOT NULL DEFAULT 0;

-- The sales report (svcgen.config.json `functions`: admins only), served as
-- POST /gw/api/rest/rpc/sales_report (docs/own-code.md "Database functions"): the paid and shipped
-- orders per day they were placed, from `since`, before `before` when given.
CREATE FUNCTION sales_report(since date, before date DEFAULT NULL)
RETURNS TABLE(day date, orders bigint, revenue double precision)
LANGUAGE sql STABLE AS $$
  SELECT o."placedAt"::date, count(*), sum(o.total)
  FROM "Order" o
  WHERE o.status IN ('paid', 'shipped')
    AND o."placedAt" >= sales_report.since
    AND (sales_report.before IS NULL OR o."placedAt" < sales_report.before)
  GROUP BY 1
  ORDER BY 1
$$;
