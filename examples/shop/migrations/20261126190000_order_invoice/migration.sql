-- AlterTable
ALTER TABLE "Order" ADD COLUMN     "invoiceId" UUID;
